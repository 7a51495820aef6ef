package trainenv

import (
	"log/slog"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pyint"
)

// Open MPI's variables for the process's place in the job (mpirun sets them).
const (
	OMPIRank      = "OMPI_COMM_WORLD_RANK"
	OMPISize      = "OMPI_COMM_WORLD_SIZE"
	OMPILocalRank = "OMPI_COMM_WORLD_LOCAL_RANK"
	OMPILocalSize = "OMPI_COMM_WORLD_LOCAL_SIZE"
)

// mpiVar is distribution_utils' get_mpi_*: the variable as an int when set, else def (with the
// reference's warning).
func mpiVar(env Env, name string, def int) (int, error) {
	v, ok := env.Lookup(name)
	if !ok {
		slog.Debug("MPI variable unset, using the default", "var", name, "default", def)
		return def, nil
	}
	return ParseInt(name, v)
}

// MPIRank is get_mpi_rank: OMPI_COMM_WORLD_RANK, 0 when unset.
func MPIRank(env Env) (int, error) { return mpiVar(env, OMPIRank, 0) }

// MPILocalRank is get_mpi_local_rank: OMPI_COMM_WORLD_LOCAL_RANK, 0 when unset.
func MPILocalRank(env Env) (int, error) { return mpiVar(env, OMPILocalRank, 0) }

// MPISize is get_mpi_size: OMPI_COMM_WORLD_SIZE, 1 when unset.
func MPISize(env Env) (int, error) { return mpiVar(env, OMPISize, 1) }

// MPILocalSize is get_mpi_local_size: OMPI_COMM_WORLD_LOCAL_SIZE, 1 when unset.
func MPILocalSize(env Env) (int, error) { return mpiVar(env, OMPILocalSize, 1) }

// EnableBPS is hvd_lib's enable_bps: int(MONOLITH_WITH_BYTEPS), 0 when unset. Non-zero selects
// BytePS instead of Horovod for collective communication.
func EnableBPS(env Env) (int, error) { return env.Int("MONOLITH_WITH_BYTEPS", 0) }

// Topology is a process's place among the processes of a synchronous (collective) job: what
// hvd_lib's rank(), size() and Horovod's local_rank()/local_size() return once initialized.
type Topology struct {
	Rank, Size, LocalRank, LocalSize int
	// Source names the variables the values came from: "byteps", "horovod", "mpi" or "single"
	// (no variable set: one process).
	Source string
}

// CollectiveTopology reads the topology the launcher published, the way the library hvd_lib
// selects would see it:
//   - BytePS (MONOLITH_WITH_BYTEPS non-zero): distribution_utils.bps_init derives it from Open
//     MPI's variables: rank and size from OMPI_COMM_WORLD_RANK/SIZE (required), the local size
//     from BYTEPS_LOCAL_SIZE, else OMPI_COMM_WORLD_LOCAL_SIZE (required), and the local rank as
//     rank % local size.
//   - Horovod: HOROVOD_RANK, HOROVOD_SIZE, HOROVOD_LOCAL_RANK, HOROVOD_LOCAL_SIZE (horovodrun's
//     Gloo launcher) when HOROVOD_RANK is set; else Open MPI's four variables when
//     OMPI_COMM_WORLD_RANK is set (mpirun); else one process (0, 1, 0, 1).
//
// A variable that is not an integer, or a rank outside [0, size), is an error naming it.
func CollectiveTopology(env Env) (Topology, error) {
	bps, err := EnableBPS(env)
	if err != nil {
		return Topology{}, err
	}
	var t Topology
	switch {
	case bps != 0:
		t, err = bytePSTopology(env)
	case has(env, "HOROVOD_RANK"):
		t, err = readTopology(env, "horovod", "HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE")
	case has(env, OMPIRank):
		t, err = readTopology(env, "mpi", OMPIRank, OMPISize, OMPILocalRank, OMPILocalSize)
	default:
		t = Topology{Rank: 0, Size: 1, LocalRank: 0, LocalSize: 1, Source: "single"}
	}
	if err != nil {
		return Topology{}, err
	}
	if t.Size < 1 || t.Rank < 0 || t.Rank >= t.Size || t.LocalSize < 1 || t.LocalRank < 0 || t.LocalRank >= t.LocalSize {
		return Topology{}, errkind.New(errkind.Value, "%s topology out of range: rank %d of %d, local rank %d of %d",
			t.Source, t.Rank, t.Size, t.LocalRank, t.LocalSize)
	}
	return t, nil
}

func has(env Env, name string) bool {
	_, ok := env.Lookup(name)
	return ok
}

// readTopology reads rank and size (required) and local rank and size (0 and 1 when unset).
func readTopology(env Env, source, rank, size, localRank, localSize string) (Topology, error) {
	t := Topology{Source: source}
	var err error
	if t.Rank, err = required(env, rank); err != nil {
		return Topology{}, err
	}
	if t.Size, err = required(env, size); err != nil {
		return Topology{}, err
	}
	if t.LocalRank, err = env.Int(localRank, 0); err != nil {
		return Topology{}, err
	}
	if t.LocalSize, err = env.Int(localSize, 1); err != nil {
		return Topology{}, err
	}
	return t, nil
}

func bytePSTopology(env Env) (Topology, error) {
	t := Topology{Source: "byteps"}
	var err error
	if t.Rank, err = required(env, OMPIRank); err != nil {
		return Topology{}, err
	}
	if t.Size, err = required(env, OMPISize); err != nil {
		return Topology{}, err
	}
	localSizeVar := "BYTEPS_LOCAL_SIZE"
	if !has(env, localSizeVar) {
		localSizeVar = OMPILocalSize
	}
	if t.LocalSize, err = required(env, localSizeVar); err != nil {
		return Topology{}, err
	}
	if t.LocalSize < 1 {
		return Topology{}, errkind.New(errkind.Value, "%s is %d: the local size must be at least 1", localSizeVar, t.LocalSize)
	}
	t.LocalRank = pyint.FloorMod(t.Rank, t.LocalSize)
	return t, nil
}

func required(env Env, name string) (int, error) {
	v, ok := env.Lookup(name)
	if !ok {
		return 0, errkind.New(errkind.NotFound, "environment variable %s is not set", name)
	}
	return ParseInt(name, v)
}
