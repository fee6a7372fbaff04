// Command otlprecv runs the OpenTelemetry Collector's own OTLP receiver
// (go.opentelemetry.io/collector/receiver/otlpreceiver) on a loopback HTTP
// address and writes every batch of traces and logs it accepts to standard
// output as OTLP JSON, one line each, prefixed by "traces " or "logs ". It prints
// "ready" once it listens and stops on SIGTERM or SIGINT. Palisade's OTLP export
// tests start it (crates/proxy/tests/otlp.rs).
//
// With a certificate and its key (PEM files), it serves https: the receiver's own
// `tls: {cert_file, key_file}` setting.
//
//	otlprecv 127.0.0.1:4318
//	otlprecv 127.0.0.1:4318 cert.pem key.pem
package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
)

func main() {
	if len(os.Args) != 2 && len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: otlprecv HOST:PORT [CERT KEY]")
		os.Exit(2)
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	emit := func(kind string, b []byte) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "%s %s\n", kind, b)
		out.Flush()
	}
	f := otlpreceiver.NewFactory()
	cfg := f.CreateDefaultConfig()
	httpConf := map[string]any{"endpoint": os.Args[1]}
	if len(os.Args) == 4 {
		httpConf["tls"] = map[string]any{"cert_file": os.Args[2], "key_file": os.Args[3]}
	}
	conf := confmap.NewFromStringMap(map[string]any{
		"protocols": map[string]any{"http": httpConf},
	})
	if err := conf.Unmarshal(cfg); err != nil {
		fail("config", err)
	}
	traces, err := consumer.NewTraces(func(_ context.Context, td ptrace.Traces) error {
		b, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
		if err != nil {
			return err
		}
		emit("traces", b)
		return nil
	})
	if err != nil {
		fail("traces consumer", err)
	}
	logs, err := consumer.NewLogs(func(_ context.Context, ld plog.Logs) error {
		b, err := (&plog.JSONMarshaler{}).MarshalLogs(ld)
		if err != nil {
			return err
		}
		emit("logs", b)
		return nil
	})
	if err != nil {
		fail("logs consumer", err)
	}
	ctx := context.Background()
	set := receivertest.NewNopSettings(f.Type())
	rt, err := f.CreateTraces(ctx, set, cfg, traces)
	if err != nil {
		fail("traces receiver", err)
	}
	rl, err := f.CreateLogs(ctx, set, cfg, logs)
	if err != nil {
		fail("logs receiver", err)
	}
	host := componenttest.NewNopHost()
	if err := rt.Start(ctx, host); err != nil {
		fail("starting", err)
	}
	if err := rl.Start(ctx, host); err != nil {
		fail("starting", err)
	}
	emit("ready", nil)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	_ = rt.Shutdown(ctx)
	_ = rl.Shutdown(ctx)
}

func fail(what string, err error) {
	fmt.Fprintf(os.Stderr, "otlprecv: %s: %v\n", what, err)
	os.Exit(1)
}
