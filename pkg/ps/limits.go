package ps

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
)

// fallbackReserveLimit is Config.ReserveLimit's default where the machine's memory is unknown.
const fallbackReserveLimit = 1 << 40

// machineMemory is the machine's memory in bytes (MemTotal of /proc/meminfo), 0 when unknown.
func machineMemory() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) == 3 && string(f[0]) == "MemTotal:" && string(f[2]) == "kB" {
			kb, err := strconv.ParseInt(string(f[1]), 10, 64)
			if err != nil || kb <= 0 {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// Bounds of the other requests; past one, the call is INVALID_ARGUMENT naming the field and the
// bound.
const (
	// MaxShardsPerTable is the most files per table a Save may write on each server
	// (SaveRequest.shards_per_table). The automatic count is 1 to 4; shard i of n holds the
	// table's stripes i, i+n, ... (64 of them, or 8 per core), so shards past that are empty
	// files, and each file costs its creation and a name in the directory.
	MaxShardsPerTable = 1024
	// MaxWorkers is the most workers a barrier or an allreduce may count (BarrierRequest.count,
	// AllReduceRequest.count): a barrier holds a slot per worker and an unreleased allreduce's
	// answer lists the missing ones; the largest training jobs have a few thousand workers.
	MaxWorkers = 1 << 16
)
