package orchestrator

import (
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// settling counts the routes whose gateway has reported the weights for the
// current generation but whose data plane may not carry them yet: a gateway
// whose status leads its data plane (Traefik writes status before its reload
// throttle lets the new configuration through) gets its settle time after
// the status write (desired.SettleFor, or the Rollout's verifyWeightSettle).
// Call it for routes VerifyStatus found current. It logs one line per route
// still settling; an error means a settle cannot be timed.
func settling(log *logrus.Entry, live []routes.Route, override *time.Duration, now time.Time) (int, error) {
	n := 0
	for _, r := range live {
		s := desired.SettleFor(r, override)
		remaining, err := s.Remaining(r, now)
		if err != nil {
			return 0, err
		}
		if remaining > 0 {
			n++
			log.WithFields(logrus.Fields{
				"route":      r.Ref.String(),
				"generation": r.Generation,
				"settle":     s.Wait.String(),
				"source":     s.Source,
				"remaining":  remaining.Round(time.Millisecond).String(),
			}).Info("weights accepted by the gateway; waiting for its data plane to carry them")
		}
	}
	return n, nil
}
