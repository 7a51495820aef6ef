package pscheck

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"

	pb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/ops"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// DefaultMemLimit is the memory limit of a machine info created without one, in bytes (the
// reference's flag monolith_default_machine_info_mem_limit, 1 << 62).
const DefaultMemLimit int64 = 1 << 62

// MachineInfo is what a parameter server knows about its machine (the reference's MachineInfo
// resource of MonolithMachineInfo).
type MachineInfo struct {
	// MemLimit is the resident memory, in bytes, at or above which the machine is out of memory.
	MemLimit int64
}

// String is the reference's MachineInfo::DebugString.
func (m *MachineInfo) String() string { return fmt.Sprintf("mem_limit: %d", m.MemLimit) }

// MachineInfoStore holds the machine infos of a process by shared name, like TensorFlow's resource
// manager holds MonolithMachineInfo resources: the first creator of a name sets its memory limit,
// later lookups of the name get that same info.
type MachineInfoStore struct {
	mu    sync.Mutex
	infos map[string]*MachineInfo
}

// NewMachineInfoStore returns an empty store.
func NewMachineInfoStore() *MachineInfoStore {
	return &MachineInfoStore{infos: map[string]*MachineInfo{}}
}

// LookupOrCreate returns the info named sharedName, creating it with memLimit when it does not
// exist (an existing info keeps its own limit, as TensorFlow's LookupOrCreate does).
func (s *MachineInfoStore) LookupOrCreate(sharedName string, memLimit int64) *MachineInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	if info, ok := s.infos[sharedName]; ok {
		return info
	}
	info := &MachineInfo{MemLimit: memLimit}
	s.infos[sharedName] = info
	return info
}

// CheckMachineHealth returns the serialized MachineHealthResult of a machine whose process uses
// currentMem bytes: empty when healthy (the reference keeps the healthy result empty to make it
// cheap), OUT_OF_MEMORY with a message when currentMem reaches info.MemLimit. A non-positive
// currentMem is an error, as the reference's MonolithCheckMachineHealth kernel fails.
func CheckMachineHealth(info *MachineInfo, currentMem int64) ([]byte, error) {
	if currentMem <= 0 {
		return nil, errkind.New(errkind.Runtime, "Unable to get the current process usage.")
	}
	if currentMem < info.MemLimit {
		return []byte{}, nil
	}
	res := &pb.MachineHealthResult{
		Status:  pb.MachineHealthResult_OUT_OF_MEMORY.Enum(),
		Message: proto.String(fmt.Sprintf("Memory limit exceeded. Current: %d, Limit: %d", currentMem, info.MemLimit)),
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("pscheck: marshal machine health: %w", err)
	}
	return b, nil
}

// ProcessMemoryUsage is this process's resident memory in bytes (VmRSS of /proc/self/status, as
// the reference's kernel reads it).
func ProcessMemoryUsage() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("pscheck: read process status: %w", err)
	}
	return ParseVmRSS(bytes.NewReader(b))
}

// ParseVmRSS reads the VmRSS line ("VmRSS:     708 kB") of a /proc/<pid>/status file and returns
// it in bytes. A missing line is 0, as in the reference (which CheckMachineHealth then rejects).
func ParseVmRSS(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return 0, errkind.New(errkind.Value, "pscheck: VmRSS line without a value: %q", sc.Text())
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0, errkind.Wrap(errkind.Value, fmt.Errorf("pscheck: VmRSS value %q: %w", fields[0], err))
		}
		return kb * 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("pscheck: read process status: %w", err)
	}
	return 0, nil
}
