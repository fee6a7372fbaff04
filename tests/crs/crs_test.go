package crs

import (
	"errors"
	"fmt"
	"os"
	"testing"
)

// TestCRS runs the CRS regression suite against a running proxy. It is driven by
// scripts/crs-conformance through these environment variables:
//
//	FTW_TESTS_DIR     directory of go-ftw YAML tests (searched recursively)
//	FTW_TARGET        host:port of the proxy
//	FTW_ERROR_LOG     the proxy's error log with `[id "N"]` match lines
//	FTW_OVERRIDES     optional overrides YAML file (see LoadOverrides)
//	FTW_RESULT        optional path for the result JSON
//	FTW_INCLUDE       optional regexp: run only matching test ids (e.g. ^942100-)
//	FTW_EXCLUDE       optional regexp: skip matching test ids
//	FTW_READ_TIMEOUT  optional response timeout (Go duration, default 5s)
//
// Failing CRS tests do not fail this Go test: the script compares the pass rate with the
// floor. Only harness errors (bad settings, unreadable files, a target that stops
// answering) fail it. Without the required variables it skips.
func TestCRS(t *testing.T) {
	settings, err := SettingsFromEnv()
	if errors.Is(err, ErrMissingEnv) {
		t.Skipf("CRS conformance run not configured (%v); use scripts/crs-conformance", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	settings.Progress = os.Stdout

	tests, err := LoadTests(settings.TestsDir)
	if err != nil {
		t.Fatal(err)
	}
	result, err := Run(settings, tests)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("harness: %d passed, %d failed, %d ignored, %d skipped (%d test files)\n",
		result.Passed, result.Failed, result.Ignored, result.Skipped, len(tests))
	if path := os.Getenv("FTW_RESULT"); path != "" {
		if err := result.WriteJSON(path); err != nil {
			t.Fatal(err)
		}
	}
	if result.Passed+result.Failed+result.Ignored == 0 {
		t.Fatal("no test case ran")
	}
}
