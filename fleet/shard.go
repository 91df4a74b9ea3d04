package fleet

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// Shard is one replica's share of the fleet: of Count replicas, the one
// numbered Index. A target belongs to the replica that scores highest for its
// name (rendezvous hashing), so a target's owner depends only on its name and
// the count: targets that come and go move no other target, and a change of
// count moves only the targets the new or removed replica wins or held.
type Shard struct{ Index, Count int }

// Owns reports whether the target called name is this replica's to probe.
func (s Shard) Owns(name string) bool {
	if s.Count <= 1 {
		return true
	}
	return Owner(name, s.Count) == s.Index
}

// Owner is the index of the replica, of count, that probes the target called name.
func Owner(name string, count int) int {
	best, owner := uint64(0), 0
	for i := range count {
		if h := xxhash.Sum64String(name + "\x00" + strconv.Itoa(i)); i == 0 || h > best {
			best, owner = h, i
		}
	}
	return owner
}

// ParseShard reads --shard.index and --shard.count. An index of "ordinal"
// is the number that ends the host name, as a StatefulSet names its pods
// (headroom-2 is 2), so that one pod template serves every replica;
// hostname is os.Hostname.
func ParseShard(index string, count int, hostname func() (string, error)) (Shard, error) {
	if count < 1 {
		return Shard{}, fmt.Errorf("shard count must be at least 1, got %d", count)
	}
	if index == "ordinal" {
		host, err := hostname()
		if err != nil {
			return Shard{}, fmt.Errorf("shard index from the host name: %w", err)
		}
		i := strings.LastIndexByte(host, '-')
		if i < 0 {
			return Shard{}, fmt.Errorf("shard index from the host name: %q does not end in -<ordinal>", host)
		}
		index = host[i+1:]
	}
	i, err := strconv.Atoi(index)
	if err != nil {
		return Shard{}, fmt.Errorf("shard index must be a number or \"ordinal\", got %q", index)
	}
	if i < 0 || i >= count {
		return Shard{}, fmt.Errorf("shard index must be in [0, %d), got %d", count, i)
	}
	return Shard{Index: i, Count: count}, nil
}
