package routes

import (
	"fmt"
	"strings"
)

// RouteError says which route err is about: it puts the route in front, unless the
// message already begins with it.
func RouteError(ref Ref, err error) error {
	if strings.HasPrefix(err.Error(), ref.String()) {
		return err
	}
	return fmt.Errorf("%s: %w", ref, err)
}
