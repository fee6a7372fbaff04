package crs

import (
	"fmt"
	schema "github.com/coreruleset/ftw-tests-schema/v2/types"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/coreruleset/go-ftw/v2/config"
)

// fakeWAF stands in for the proxy: it writes a ModSecurity-style line to its error log for
// the X-CRS-Test marker header and for each rule id listed in the `ids` query parameter,
// and answers with the status in the `status` query parameter (default 200).
func fakeWAF(t *testing.T) (target, errorLog string) {
	t.Helper()
	errorLog = filepath.Join(t.TempDir(), "error.log")
	logFile, err := os.OpenFile(errorLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	write := func(line string) {
		mu.Lock()
		defer mu.Unlock()
		if _, err := logFile.WriteString(line + "\n"); err != nil {
			t.Error(err)
		}
	}
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if marker := r.Header.Get(MarkerHeader); marker != "" {
			write(fmt.Sprintf(`ModSecurity: Warning. Matched "Operator Rx" against "REQUEST_HEADERS:X-CRS-Test" [id "999999"] [msg "X-CRS-Test %s"]`, marker))
			return
		}
		if ids := r.URL.Query().Get("ids"); ids != "" {
			for _, id := range strings.Split(ids, ",") {
				write(fmt.Sprintf(`ModSecurity: Warning. [id "%s"] [msg "fake match"] [uri "%s"]`, id, r.URL.Path))
			}
		}
		if status := r.URL.Query().Get("status"); status != "" {
			code, err := strconv.Atoi(status)
			if err != nil {
				t.Errorf("bad status %q", status)
				code = 500
			}
			w.WriteHeader(code)
		}
	}))
	t.Cleanup(func() {
		server.Close()
		_ = logFile.Close()
	})
	return strings.TrimPrefix(server.URL, "http://"), errorLog
}

func TestRunCountsEveryCaseAndSurvivesRetryOnce(t *testing.T) {
	target, errorLog := fakeWAF(t)
	tests, err := LoadTests("testdata/tests")
	if err != nil {
		t.Fatal(err)
	}
	if len(tests) != 3 {
		t.Fatalf("loaded %d test files, want 3", len(tests))
	}
	var progress strings.Builder
	result, err := Run(Settings{
		Target:    target,
		ErrorLog:  errorLog,
		Overrides: "testdata/overrides.yaml",
		Progress:  &progress,
	}, tests)
	if err != nil {
		t.Fatal(err)
	}
	if result.Passed != 3 || result.Failed != 4 || result.Ignored != 1 || result.Skipped != 0 {
		t.Fatalf("got %+v, want 3 passed, 4 failed, 1 ignored", result)
	}
	want := map[string]*regexp.Regexp{
		"100001-2": regexp.MustCompile(`Failed to find the following IDs in the log: \[100001\]; rules logged: \[5\]`),
		"100001-3": regexp.MustCompile(`Unexpectedly found the following IDs in the log: \[5\]`),
		"100002-1": regexp.MustCompile(`^failed twice \(retry_once\)`),
		"100002-2": regexp.MustCompile(`Failed to match response status. Expected: 403, found: 200`),
	}
	if len(result.Failures) != len(want) {
		t.Fatalf("failures %+v", result.Failures)
	}
	for _, f := range result.Failures {
		t.Logf("FAIL %s: %s", f.ID, f.Reason)
		re, ok := want[f.ID]
		if !ok {
			t.Errorf("unexpected failure %s: %s", f.ID, f.Reason)
			continue
		}
		if !re.MatchString(f.Reason) {
			t.Errorf("failure %s: reason %q does not match %q", f.ID, f.Reason, re)
		}
		if !strings.Contains(progress.String(), "FAIL "+f.ID+": ") {
			t.Errorf("failure %s not reported as progress", f.ID)
		}
	}

	resultPath := filepath.Join(t.TempDir(), "result.json")
	if err := result.WriteJSON(resultPath); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(resultPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"passed": 3`, `"failed": 4`, `"ignored": 1`, `"id": "100002-1"`} {
		if !strings.Contains(string(data), key) {
			t.Errorf("result JSON lacks %s:\n%s", key, data)
		}
	}
}

func TestRunIncludeFilter(t *testing.T) {
	target, errorLog := fakeWAF(t)
	tests, err := LoadTests("testdata/tests")
	if err != nil {
		t.Fatal(err)
	}
	result, err := Run(Settings{
		Target:   target,
		ErrorLog: errorLog,
		Include:  regexp.MustCompile(`^100001-1$`),
	}, tests)
	if err != nil {
		t.Fatal(err)
	}
	if result.Passed != 1 || result.Failed != 0 || result.Skipped != 7 {
		t.Fatalf("got %+v, want 1 passed and 7 skipped", result)
	}
}

func TestRunStopsWhenTargetIsGone(t *testing.T) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := listener.Addr().String()
	_ = listener.Close()
	errorLog := filepath.Join(t.TempDir(), "error.log")
	if err := os.WriteFile(errorLog, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests, err := LoadTests("testdata/tests")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(Settings{Target: target, ErrorLog: errorLog}, tests)
	if err == nil || !strings.Contains(err.Error(), "stopped answering") {
		t.Fatalf("got error %v, want a harness error about the target", err)
	}
}

func TestOverridesNeedReasons(t *testing.T) {
	for _, path := range []string{"testdata/bad-overrides.yaml", "testdata/bad-platform-overrides.yaml"} {
		cfg := config.NewRunnerConfiguration(config.NewDefaultConfig())
		err := LoadOverrides(path, cfg)
		if err == nil || !strings.Contains(err.Error(), "has no reason") {
			t.Errorf("%s: got %v, want a missing-reason error", path, err)
		}
	}
	cfg := config.NewRunnerConfiguration(config.NewDefaultConfig())
	if err := LoadOverrides("testdata/overrides.yaml", cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.TestOverride.Ignore) != 1 || len(cfg.PlatformOverrides.TestOverrides) != 1 {
		t.Fatalf("loaded %d ignores and %d platform overrides, want 1 and 1",
			len(cfg.TestOverride.Ignore), len(cfg.PlatformOverrides.TestOverrides))
	}
	// The repository's own overrides file must load too.
	cfg = config.NewRunnerConfiguration(config.NewDefaultConfig())
	if err := LoadOverrides("overrides.yaml", cfg); err != nil {
		t.Fatalf("overrides.yaml: %v", err)
	}
}

func TestSettingsFromEnv(t *testing.T) {
	t.Setenv("FTW_TESTS_DIR", "")
	t.Setenv("FTW_TARGET", "127.0.0.1:1")
	t.Setenv("FTW_ERROR_LOG", "")
	if _, err := SettingsFromEnv(); err == nil || !strings.Contains(err.Error(), "FTW_ERROR_LOG, FTW_TESTS_DIR") {
		t.Fatalf("got %v", err)
	}
	t.Setenv("FTW_TESTS_DIR", "d")
	t.Setenv("FTW_ERROR_LOG", "l")
	t.Setenv("FTW_INCLUDE", "^9421")
	t.Setenv("FTW_READ_TIMEOUT", "250ms")
	s, err := SettingsFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if s.Include == nil || !s.Include.MatchString("942100-1") || s.ReadTimeout.Milliseconds() != 250 {
		t.Fatalf("got %+v", s)
	}
	t.Setenv("FTW_EXCLUDE", "(")
	if _, err := SettingsFromEnv(); err == nil {
		t.Fatal("a bad FTW_EXCLUDE was accepted")
	}
}

func TestNegativeCases(t *testing.T) {
	neg := schema.Test{Stages: []schema.Stage{{}, {}}}
	neg.Stages[1].Output.Log.NoExpectIds = []uint{942100}
	if !negative(neg) {
		t.Fatal("a case with only no_expect_ids is negative")
	}
	pos := neg
	pos.Stages = []schema.Stage{{}, {}}
	pos.Stages[0].Output.Log.NoExpectIds = []uint{1}
	pos.Stages[1].Output.Log.ExpectIds = []uint{942100}
	if negative(pos) {
		t.Fatal("a case that expects a rule to match is not negative")
	}
	if negative(schema.Test{Stages: []schema.Stage{{}}}) {
		t.Fatal("a case with no log expectations is not negative")
	}
}
