package pipeline

import "testing"

// Every restore response has room for every changelog partition at its
// full size (up to 512 partitions), which keeps kfake from cutting a
// partition short without its aborted transactions; sizes stay bounded.
func TestRestoreFetchesHaveRoomForEveryPartition(t *testing.T) {
	for _, n := range []int{0, 1, 6, 32, 33, 64, 512, 513, 5000} {
		per, all := restoreFetchBytes(n)
		if per < 1<<20 || per > 16<<20 || all > 512<<20 {
			t.Errorf("n=%d: %d a partition, %d a response: out of bounds", n, per, all)
		}
		if n <= 512 && int64(per)*int64(max(n, 1)) > int64(all) {
			t.Errorf("n=%d: %d a partition, %d a response: no room for all", n, per, all)
		}
	}
	if per, all := restoreFetchBytes(6); per != 16<<20 || all != 96<<20 {
		t.Errorf("6 partitions: %d, %d; want 16 MiB a partition, 96 MiB a response", per, all)
	}
}
