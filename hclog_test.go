package main

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
)

// Each logrus entry is one hclog JSON line: go-plugin reads @level,
// @message and @timestamp (in its own layout) and keeps every other key as
// a field; a field named like one of those keeps its value under fields.*.
func TestEntriesAreWrittenAsHclogEntries(t *testing.T) {
	at := time.Date(2026, 12, 7, 5, 30, 0, 123456789, time.UTC)
	for _, c := range []struct {
		level logrus.Level
		data  logrus.Fields
		want  map[string]any
	}{
		{logrus.ErrorLevel, logrus.Fields{"rollout": "shop/demo", "error": errors.New("refused")},
			map[string]any{"@level": "error", "@message": "m", "@timestamp": "2026-12-07T05:30:00.123456Z", "rollout": "shop/demo", "error": "refused"}},
		{logrus.WarnLevel, logrus.Fields{"@level": "x", "routes": 3},
			map[string]any{"@level": "warn", "@message": "m", "@timestamp": "2026-12-07T05:30:00.123456Z", "fields.@level": "x", "routes": float64(3)}},
		{logrus.InfoLevel, nil, map[string]any{"@level": "info", "@message": "m", "@timestamp": "2026-12-07T05:30:00.123456Z"}},
		{logrus.DebugLevel, nil, map[string]any{"@level": "debug", "@message": "m", "@timestamp": "2026-12-07T05:30:00.123456Z"}},
		{logrus.FatalLevel, nil, map[string]any{"@level": "error", "@message": "m", "@timestamp": "2026-12-07T05:30:00.123456Z"}},
	} {
		line, err := hclogFormatter{}.Format(&logrus.Entry{Level: c.level, Message: "m", Time: at, Data: c.data})
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(line, &got); err != nil {
			t.Fatalf("%s: %q is not JSON: %v", c.level, line, err)
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.level, diff)
		}
		if _, err := time.Parse("2006-01-02T15:04:05.000000Z07:00", got["@timestamp"].(string)); err != nil {
			t.Errorf("go-plugin cannot parse the timestamp: %v", err)
		}
	}
}
