package verify

import (
	"testing"

	"github.com/eosctl/eos/internal/testbroker"
)

// TestMain stops the shared Apache Kafka cluster after the tests
// (EOS_TEST_BROKER=kafka); on the embedded broker it only runs them.
func TestMain(m *testing.M) { testbroker.Main(m) }
