package dirstore_test

import (
	"os"
	"testing"

	"github.com/gocheckpoint/checkpoint/internal/killtest"
)

// TestMain runs the roles of the package's kill tests (killtest.Register)
// when the test binary is started as one.
func TestMain(m *testing.M) {
	killtest.Dispatch()
	os.Exit(m.Run())
}
