package main

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/sirupsen/logrus"
)

// The controller runs the plugin under a go-plugin client, which logs every
// line the plugin writes on stderr into the controller's own log. It keeps
// a line's level only when the line is an hclog JSON entry (@level,
// @message, @timestamp, and the fields beside them: go-plugin's
// log_entry.go); any other line it logs at DEBUG, where level-based alerts
// and filters never see it. So, by default, the plugin writes such entries.

// hclogTime is the @timestamp layout go-plugin parses; an entry whose
// timestamp does not parse is logged at DEBUG as it is.
const hclogTime = "2006-01-02T15:04:05.000000Z07:00"

// hclogFormatter writes logrus entries as hclog JSON entries, one a line.
type hclogFormatter struct{}

func (hclogFormatter) Format(e *logrus.Entry) ([]byte, error) {
	out := make(map[string]any, len(e.Data)+3)
	for k, v := range e.Data {
		switch k {
		case "@level", "@message", "@timestamp":
			k = "fields." + k
		}
		if err, ok := v.(error); ok {
			v = err.Error() // encoding/json writes most errors as {}
		}
		out[k] = v
	}
	out["@level"] = hclogLevel(e.Level)
	out["@message"] = e.Message
	out["@timestamp"] = e.Time.Format(hclogTime)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return nil, fmt.Errorf("writing a log entry as JSON: %w", err)
	}
	return b.Bytes(), nil
}

// hclogLevel is hclog's name of a logrus level: hclog has no panic or fatal.
func hclogLevel(l logrus.Level) string {
	switch l {
	case logrus.TraceLevel:
		return "trace"
	case logrus.DebugLevel:
		return "debug"
	case logrus.InfoLevel:
		return "info"
	case logrus.WarnLevel:
		return "warn"
	}
	return "error"
}
