// Command loadgen is the forward-proxy benchmark's client and origin
// (bench/forward.py). It speaks through a forward proxy the way a browser does:
// absolute-form HTTP requests on kept connections, and CONNECT tunnels carrying
// TLS. Each mode runs for a fixed time or a fixed amount of data and prints one
// JSON line with what it did.
//
//	loadgen origin -listen 127.0.0.1:0 -dir DIR
//	    a TLS origin with a certificate for "localhost" signed by a CA written to
//	    DIR/ca.pem; prints "listening PORT"; "/" answers 64 bytes, "/source?n=N"
//	    answers N bytes
//	loadgen http -proxy URL -target URL -duration 5s -conns 8
//	    absolute-form GETs of target through the proxy on kept connections
//	loadgen connect -proxy URL -origin localhost:PORT -ca DIR/ca.pem -duration 5s -conns 4
//	    a new CONNECT tunnel and TLS handshake for every request ("setup")
//	loadgen throughput -proxy URL -origin localhost:PORT -ca DIR/ca.pem -bytes N
//	    one tunnel, one response of N bytes through it
//	loadgen tls -target https://localhost:PORT/ -ca CA -duration 5s -conns 4
//	    no proxy: a new TLS connection for every request ("setup"), for a
//	    TLS-terminating reverse proxy
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fail("usage: loadgen origin|http|connect|throughput [flags]")
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:0", "origin: address")
	dir := fs.String("dir", ".", "origin: where ca.pem is written")
	proxy := fs.String("proxy", "", "the forward proxy, http://HOST:PORT")
	target := fs.String("target", "", "http: the URL requested")
	origin := fs.String("origin", "", "connect, throughput: localhost:PORT")
	ca := fs.String("ca", "", "connect, throughput: the origin's CA")
	duration := fs.Duration("duration", 5*time.Second, "http, connect: how long")
	conns := fs.Int("conns", 4, "http, connect: concurrent clients")
	bytes := fs.Int64("bytes", 256<<20, "throughput: response size")
	if err := fs.Parse(os.Args[2:]); err != nil {
		fail(err.Error())
	}
	switch os.Args[1] {
	case "origin":
		serveOrigin(*listen, *dir)
	case "http":
		runHTTP(*proxy, *target, *duration, *conns)
	case "connect":
		runConnect(*proxy, *origin, *ca, *duration, *conns)
	case "throughput":
		runThroughput(*proxy, *origin, *ca, *bytes)
	case "tls":
		runTLS(*target, *ca, *duration, *conns)
	default:
		fail("unknown mode " + os.Args[1])
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "loadgen:", msg)
	os.Exit(2)
}

func emit(v map[string]any) {
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
}

// serveOrigin makes a CA and a "localhost" leaf, writes the CA, and serves TLS.
func serveOrigin(listen, dir string) {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "loadgen CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		fail(err.Error())
	}
	caCert, _ := x509.ParseCertificate(caDER)
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, caCert, &leafKey.PublicKey, caKey)
	if err != nil {
		fail(err.Error())
	}
	pemCA := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), pemCA, 0o644); err != nil {
		fail(err.Error())
	}
	cert := tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		fail(err.Error())
	}
	fmt.Printf("listening %d\n", ln.Addr().(*net.TCPAddr).Port)
	small := make([]byte, 64)
	chunk := make([]byte, 64<<10)
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { w.Write(small) })
	mux.HandleFunc("/source", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		for n > 0 {
			k := int64(len(chunk))
			if n < k {
				k = n
			}
			if _, err := w.Write(chunk[:k]); err != nil {
				return
			}
			n -= k
		}
	})
	srv := &http.Server{Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	if err := srv.ServeTLS(ln, "", ""); err != nil {
		fail(err.Error())
	}
}

func proxyURL(p string) *url.URL {
	u, err := url.Parse(p)
	if err != nil || p == "" {
		fail("-proxy must be http://HOST:PORT")
	}
	return u
}

func caPool(path string) *x509.CertPool {
	b, err := os.ReadFile(path)
	if err != nil {
		fail(err.Error())
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		fail("no certificate in " + path)
	}
	return pool
}

// loop runs work on conns goroutines for d and counts successes and errors.
func loop(d time.Duration, conns int, work func() error) (int64, int64, string) {
	var ok, bad atomic.Int64
	var firstErr atomic.Value
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if err := work(); err != nil {
					bad.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				} else {
					ok.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	e, _ := firstErr.Load().(string)
	return ok.Load(), bad.Load(), e
}

func get(c *http.Client, u string) error {
	resp, err := c.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

func runHTTP(proxy, target string, d time.Duration, conns int) {
	tr := &http.Transport{Proxy: http.ProxyURL(proxyURL(proxy)), MaxIdleConnsPerHost: conns,
		MaxConnsPerHost: conns, DisableCompression: true}
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	ok, bad, e := loop(d, conns, func() error { return get(c, target) })
	emit(map[string]any{"mode": "http", "requests": ok, "errors": bad, "first_error": e})
}

func runConnect(proxy, origin, ca string, d time.Duration, conns int) {
	pool := caPool(ca)
	ok, bad, e := loop(d, conns, func() error {
		// A new transport per request: a new tunnel and a new TLS handshake.
		tr := &http.Transport{Proxy: http.ProxyURL(proxyURL(proxy)),
			TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}
		defer tr.CloseIdleConnections()
		c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
		return get(c, "https://"+origin+"/")
	})
	emit(map[string]any{"mode": "connect", "setups": ok, "errors": bad, "first_error": e})
}

func runThroughput(proxy, origin, ca string, n int64) {
	tr := &http.Transport{Proxy: http.ProxyURL(proxyURL(proxy)),
		TLSClientConfig: &tls.Config{RootCAs: caPool(ca)}, DisableCompression: true}
	c := &http.Client{Transport: tr, Timeout: 10 * time.Minute}
	t0 := time.Now()
	resp, err := c.Get(fmt.Sprintf("https://%s/source?n=%d", origin, n))
	if err != nil {
		fail(err.Error())
	}
	got, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	secs := time.Since(t0).Seconds()
	if err != nil || got != n {
		fail(fmt.Sprintf("got %d of %d bytes: %v", got, n, err))
	}
	emit(map[string]any{"mode": "throughput", "bytes": got, "seconds": secs,
		"mib_per_s": float64(got) / secs / (1 << 20)})
}

func runTLS(target, ca string, d time.Duration, conns int) {
	pool := caPool(ca)
	ok, bad, e := loop(d, conns, func() error {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}
		defer tr.CloseIdleConnections()
		c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
		return get(c, target)
	})
	emit(map[string]any{"mode": "tls", "setups": ok, "errors": bad, "first_error": e})
}
