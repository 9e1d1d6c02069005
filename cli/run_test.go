package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// runCLI runs the command as a person would, against nothing but what args
// name, and returns its exit status, standard output and standard error. A
// command that does not return in a minute fails the test.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	done := make(chan int, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go func() { done <- Run(args, &out, &errOut) }()
	select {
	case code := <-done:
		return code, out.String(), errOut.String()
	case <-ctx.Done():
		t.Fatalf("%s did not return within a minute", strings.Join(args, " "))
		return 0, "", ""
	}
}
