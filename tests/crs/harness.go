// Package crs runs the OWASP Core Rule Set regression tests (go-ftw YAML files) against a
// running Palisade proxy, using go-ftw v2 as a library.
//
// The way it drives go-ftw follows Coraza's testing/coreruleset test, with one difference:
// go-ftw's runner.Run stops the whole run at the first test that returns an error (for
// example a retry_once test that fails twice, or a log marker that never shows up). Here
// every test case runs through its own runner.RunTest call, so such a test is counted as
// one failure and the rest of the suite still runs.
package crs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	schema "github.com/coreruleset/ftw-tests-schema/v2/types"
	"github.com/coreruleset/go-ftw/v2/config"
	"github.com/coreruleset/go-ftw/v2/ftwhttp"
	"github.com/coreruleset/go-ftw/v2/output"
	"github.com/coreruleset/go-ftw/v2/runner"
	"github.com/coreruleset/go-ftw/v2/test"
	"github.com/coreruleset/go-ftw/v2/waflog"
	"github.com/rs/zerolog"
	"github.com/rs/zerolog/log"
)

func init() {
	// go-ftw logs through zerolog's global logger; keep its chatter (debug notes about
	// loading overrides and the like) off the output. Run swaps in its own collector.
	log.Logger = log.Logger.Level(zerolog.WarnLevel)
}

// MarkerHeader is the request header whose value rule 999999 of the CRS test setup writes
// to the error log, so go-ftw can find where each test's log lines start and end.
const MarkerHeader = "X-CRS-Test"

// Settings say what to run and where.
type Settings struct {
	// TestsDir is searched recursively for *.yaml and *.yml go-ftw test files.
	TestsDir string
	// Target is host:port of the proxy under test.
	Target string
	// ErrorLog is the proxy's error log, holding ModSecurity-style `[id "N"]` match lines.
	ErrorLog string
	// Overrides is an optional YAML file; see LoadOverrides. Empty means none.
	Overrides string
	// Include, if set, runs only test cases whose id (RULE-TEST) matches.
	Include *regexp.Regexp
	// Exclude, if set, skips test cases whose id matches.
	Exclude *regexp.Regexp
	// ReadTimeout bounds the wait for each response; zero means 5s.
	ReadTimeout time.Duration
	// Progress, if set, receives one line per failing test as it happens.
	Progress io.Writer
}

// Failure is one failing test case and why it failed.
type Failure struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
	// Negative is true for a case that only says which rules must not match
	// (no_expect_ids, no expect_ids in any stage).
	Negative bool `json:"negative"`
}

// Result is the outcome of a run, as written to the result JSON file.
type Result struct {
	Passed   int       `json:"passed"`
	Failed   int       `json:"failed"`
	Ignored  int       `json:"ignored"`
	Skipped  int       `json:"skipped"`
	Failures []Failure `json:"failures"`
}

// WriteJSON writes the result to path, indented, with a trailing newline.
func (r *Result) WriteJSON(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// LoadTests reads every go-ftw test file under dir, in lexical path order.
func LoadTests(dir string) ([]*test.FTWTest, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			paths = append(paths, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading tests directory %s: %w", dir, err)
	}
	slices.Sort(paths)
	tests := make([]*test.FTWTest, 0, len(paths))
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		ftwTest, err := test.GetTestFromYaml(data, filepath.Base(path))
		if err != nil {
			return nil, fmt.Errorf("test file %s: %w", path, err)
		}
		tests = append(tests, ftwTest)
	}
	if len(tests) == 0 {
		return nil, fmt.Errorf("no *.yaml test files under %s", dir)
	}
	return tests, nil
}

// LoadOverrides reads the overrides file into cfg and runnerCfg.
//
// The file may hold two kinds of entries, each of which must give a non-empty reason:
//   - `test_overrides:` go-ftw platform overrides (the format of CRS's
//     tests/regression/nginx-overrides.yaml): a rule_id, test_ids and a replacement
//     `output` for tests whose expected result differs on this platform;
//   - `testoverride:` with `ignore:`, `forcepass:` or `forcefail:` maps from a test-id
//     regular expression to the reason (the format of go-ftw's .ftw.yaml).
func LoadOverrides(path string, runnerCfg *config.RunnerConfig) error {
	if path == "" {
		return nil
	}
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("overrides file: %w", err)
	}
	fileCfg, err := config.NewConfigFromFile(path)
	if err != nil {
		return fmt.Errorf("overrides file %s: %w", path, err)
	}
	for name, entries := range map[string]map[*config.FTWRegexp]string{
		"ignore":    fileCfg.TestOverride.Ignore,
		"forcepass": fileCfg.TestOverride.ForcePass,
		"forcefail": fileCfg.TestOverride.ForceFail,
	} {
		for re, reason := range entries {
			if strings.TrimSpace(reason) == "" {
				return fmt.Errorf("overrides file %s: testoverride.%s entry %q has no reason",
					path, name, (*regexp.Regexp)(re).String())
			}
		}
	}
	runnerCfg.TestOverride.Ignore = fileCfg.TestOverride.Ignore
	runnerCfg.TestOverride.ForcePass = fileCfg.TestOverride.ForcePass
	runnerCfg.TestOverride.ForceFail = fileCfg.TestOverride.ForceFail

	if err := runnerCfg.LoadPlatformOverrides(path); err != nil {
		return fmt.Errorf("overrides file %s: %w", path, err)
	}
	for i, o := range runnerCfg.PlatformOverrides.TestOverrides {
		if strings.TrimSpace(o.Reason) == "" {
			return fmt.Errorf("overrides file %s: test_overrides entry %d (rule %d, tests %v) has no reason",
				path, i+1, o.RuleId, o.TestIds)
		}
	}
	return nil
}

// reasonCollector receives go-ftw's log events (JSON lines from zerolog) and keeps the ones
// that explain why a check failed.
type reasonCollector struct {
	mu       sync.Mutex
	messages []string
}

// reasonPrefixes are the starts of go-ftw's messages that explain a failed check.
var reasonPrefixes = []string{
	"Failed to",
	"Unexpectedly found",
	"Found more than one triggered rule",
	"Encountered unexpected error",
	"No response to check",
	"failed to assert logs",
	"Error expected: true",
	"ftw/run: error receiving response",
	"start marker not found",
}

func (c *reasonCollector) Write(p []byte) (int, error) {
	var event struct {
		Message string `json:"message"`
		Error   string `json:"error"`
	}
	if json.Unmarshal(p, &event) != nil {
		return len(p), nil
	}
	for _, prefix := range reasonPrefixes {
		if strings.HasPrefix(event.Message, prefix) {
			msg := strings.TrimSpace(event.Message)
			if event.Error != "" {
				msg += ": " + event.Error
			}
			c.mu.Lock()
			c.messages = append(c.messages, msg)
			c.mu.Unlock()
			break
		}
	}
	return len(p), nil
}

func (c *reasonCollector) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	messages := c.messages
	c.messages = nil
	return messages
}

// outcome is what one test case's run amounted to.
type outcome int

const (
	outcomePassed outcome = iota
	outcomeFailed
	outcomeIgnored
	outcomeSkipped
)

// statsSnapshot holds the lengths of go-ftw's result lists before a test runs.
type statsSnapshot struct{ success, failed, ignored, skipped, forcedPass, forcedFail int }

func snapshot(s *runner.RunStats) statsSnapshot {
	return statsSnapshot{len(s.Success), len(s.Failed), len(s.Ignored), len(s.Skipped),
		len(s.ForcedPass), len(s.ForcedFail)}
}

// Run runs every test case of tests against settings.Target. It returns an error only when
// the harness itself cannot work (bad settings, unreadable log, overrides without reasons,
// target gone); failing test cases are reported in the Result.
func Run(settings Settings, tests []*test.FTWTest) (*Result, error) {
	host, portText, err := net.SplitHostPort(settings.Target)
	if err != nil {
		return nil, fmt.Errorf("target %q is not host:port: %w", settings.Target, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, fmt.Errorf("target %q has a bad port: %w", settings.Target, err)
	}
	if _, err := os.Stat(settings.ErrorLog); err != nil {
		return nil, fmt.Errorf("error log: %w", err)
	}

	cfg := config.NewDefaultConfig()
	cfg.LogFile = settings.ErrorLog
	cfg.LogMarkerHeaderName = MarkerHeader
	runnerCfg := config.NewRunnerConfiguration(cfg)
	runnerCfg.TestOverride.Overrides.DestAddr = &host
	runnerCfg.TestOverride.Overrides.Port = &port
	runnerCfg.ConnectTimeout = 3 * time.Second
	runnerCfg.ReadTimeout = settings.ReadTimeout
	if runnerCfg.ReadTimeout == 0 {
		runnerCfg.ReadTimeout = 5 * time.Second
	}
	runnerCfg.Include = settings.Include
	runnerCfg.Exclude = settings.Exclude
	runnerCfg.ShowOnlyFailed = true
	runnerCfg.Output = output.Quiet
	// go-ftw reports why a check failed only through its global zerolog logger, at debug
	// level; collect those messages for the failure reasons.
	collector := &reasonCollector{}
	savedLogger, savedLevel := log.Logger, zerolog.GlobalLevel()
	log.Logger = zerolog.New(collector).Level(zerolog.DebugLevel)
	zerolog.SetGlobalLevel(zerolog.DebugLevel)
	defer func() {
		log.Logger = savedLogger
		zerolog.SetGlobalLevel(savedLevel)
	}()

	if err := LoadOverrides(settings.Overrides, runnerCfg); err != nil {
		return nil, err
	}

	logLines, err := waflog.NewFTWLogLines(runnerCfg)
	if err != nil {
		return nil, fmt.Errorf("error log %s: %w", settings.ErrorLog, err)
	}
	defer func() { _ = logLines.Cleanup() }()
	client, err := ftwhttp.NewClient(runnerCfg)
	if err != nil {
		return nil, fmt.Errorf("go-ftw HTTP client: %w", err)
	}
	runContext := &runner.TestRunContext{
		RunnerConfig:   runnerCfg,
		Include:        runnerCfg.Include,
		Exclude:        runnerCfg.Exclude,
		ShowOnlyFailed: true,
		Output:         output.NewOutput(string(output.Quiet), io.Discard),
		Stats:          runner.NewRunStats(),
		Client:         client,
		LogLines:       logLines,
	}

	result := &Result{Failures: []Failure{}}
	for _, ftwTest := range tests {
		for _, testCase := range ftwTest.Tests {
			id := testCase.IdString()
			single := *ftwTest
			// Each case gets its own copy of its stages: platform overrides rewrite them.
			testCase.Stages = slices.Clone(testCase.Stages)
			single.Tests = []schema.Test{testCase}

			before := snapshot(runContext.Stats)
			collector.take()
			runErr := runner.RunTest(runContext, &single)
			reasons := collector.take()

			var got outcome
			var reason string
			if runErr != nil {
				got = outcomeFailed
				reason = errorReason(runErr, reasons)
				if !reachable(settings.Target) {
					return result, fmt.Errorf("target %s stopped answering during test %s (%s)",
						settings.Target, id, reason)
				}
			} else {
				got, reason = classify(runContext, before, id, reasons)
			}
			switch got {
			case outcomePassed:
				result.Passed++
			case outcomeIgnored:
				result.Ignored++
			case outcomeSkipped:
				result.Skipped++
			case outcomeFailed:
				result.Failed++
				result.Failures = append(result.Failures, Failure{ID: id, Reason: reason, Negative: negative(testCase)})
				if settings.Progress != nil {
					fmt.Fprintf(settings.Progress, "FAIL %s: %s\n", id, reason)
				}
			}
		}
	}
	return result, nil
}

// negative reports whether a test case only says which rules must not match: some
// stage lists no_expect_ids and none lists expect_ids.
func negative(t schema.Test) bool {
	some := false
	for _, st := range t.Stages {
		if len(st.Output.Log.ExpectIds) > 0 {
			return false
		}
		if len(st.Output.Log.NoExpectIds) > 0 {
			some = true
		}
	}
	return some
}

// classify reads what runner.RunTest recorded for the test case just run.
func classify(rc *runner.TestRunContext, before statsSnapshot, id string, reasons []string) (outcome, string) {
	after := snapshot(rc.Stats)
	switch {
	case after.success > before.success, after.forcedPass > before.forcedPass:
		return outcomePassed, ""
	case after.ignored > before.ignored:
		return outcomeIgnored, ""
	case after.skipped > before.skipped:
		return outcomeSkipped, ""
	case after.forcedFail > before.forcedFail:
		return outcomeFailed, "forced to fail by the overrides file: " + overrideReason(rc.RunnerConfig.TestOverride.ForceFail, id)
	case after.failed > before.failed:
		return outcomeFailed, failureReason(reasons, rc.Stats.TriggeredRules[id])
	default:
		return outcomeFailed, "go-ftw recorded no result for this test"
	}
}

func overrideReason(entries map[*config.FTWRegexp]string, id string) string {
	for re, reason := range entries {
		if re.MatchString(id) {
			return reason
		}
	}
	return "(no matching entry)"
}

// failureReason joins go-ftw's explanations with the rule ids the log showed per stage.
func failureReason(reasons []string, triggered [][]uint) string {
	text := strings.Join(dedupe(reasons), "; ")
	if text == "" {
		text = "a check failed (go-ftw gave no detail)"
	}
	if len(triggered) > 0 {
		stages := make([]string, len(triggered))
		for i, ids := range triggered {
			stages[i] = fmt.Sprint(ids)
		}
		text += "; rules logged: " + strings.Join(stages, " ")
	}
	return text
}

// errorReason describes a test that ended with an error instead of a result.
func errorReason(err error, reasons []string) string {
	text := err.Error()
	if text == "retry-once" {
		text = "failed twice (retry_once)"
	} else {
		text = "run error: " + text
	}
	if extra := strings.Join(dedupe(reasons), "; "); extra != "" {
		text += "; " + extra
	}
	return text
}

func dedupe(items []string) []string {
	var out []string
	for _, item := range items {
		if !slices.Contains(out, item) {
			out = append(out, item)
		}
	}
	return out
}

// reachable reports whether a TCP connection to target can be opened.
func reachable(target string) bool {
	conn, err := net.DialTimeout("tcp", target, 2*time.Second)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}

// SettingsFromEnv builds Settings from the FTW_* environment variables. It returns
// errMissingEnv (wrapped) when a required variable is unset.
func SettingsFromEnv() (Settings, error) {
	s := Settings{
		TestsDir:  os.Getenv("FTW_TESTS_DIR"),
		Target:    os.Getenv("FTW_TARGET"),
		ErrorLog:  os.Getenv("FTW_ERROR_LOG"),
		Overrides: os.Getenv("FTW_OVERRIDES"),
	}
	var missing []string
	for name, value := range map[string]string{
		"FTW_TESTS_DIR": s.TestsDir, "FTW_TARGET": s.Target, "FTW_ERROR_LOG": s.ErrorLog,
	} {
		if value == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return s, fmt.Errorf("%w: %s", ErrMissingEnv, strings.Join(missing, ", "))
	}
	for name, dst := range map[string]**regexp.Regexp{"FTW_INCLUDE": &s.Include, "FTW_EXCLUDE": &s.Exclude} {
		if text := os.Getenv(name); text != "" {
			re, err := regexp.Compile(text)
			if err != nil {
				return s, fmt.Errorf("%s: %w", name, err)
			}
			*dst = re
		}
	}
	if text := os.Getenv("FTW_READ_TIMEOUT"); text != "" {
		d, err := time.ParseDuration(text)
		if err != nil {
			return s, fmt.Errorf("FTW_READ_TIMEOUT: %w", err)
		}
		s.ReadTimeout = d
	}
	return s, nil
}

// ErrMissingEnv means a required FTW_* environment variable is not set.
var ErrMissingEnv = errors.New("required environment variables are not set")
