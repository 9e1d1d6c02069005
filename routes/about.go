package routes

import (
	"fmt"
	"strings"
)

// About says which route err is about: it puts the route in front, unless the
// message already begins with it.
func About(ref Ref, err error) error {
	if strings.HasPrefix(err.Error(), ref.String()) {
		return err
	}
	return fmt.Errorf("%s: %w", ref, err)
}
