package trainenv

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/monolith-go/monolith/pkg/errkind"
)

func TestGeneratePSMFromUUID(t *testing.T) {
	for _, uuid := range []string{"", "3f2c1a9e-7b4d-4e21-9c55-0a1b2c3d4e5f", "job"} {
		if got := GeneratePSMFromUUID(uuid); got != uuid {
			t.Errorf("GeneratePSMFromUUID(%q) = %q, want it unchanged", uuid, got)
		}
	}
}

func TestZKAuthData(t *testing.T) {
	tests := []struct {
		name string
		env  Env
		want []ZKAuth
	}{
		{"unset", Env{}, nil},
		{"empty", Env{"ZK_AUTH": ""}, nil},
		{"digest", Env{"ZK_AUTH": "user:secret"}, []ZKAuth{{Scheme: "digest", Credential: "user:secret"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ZKAuthData(tc.env); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ZKAuthData = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMPIVars(t *testing.T) {
	tests := []struct {
		name     string
		env      Env
		want     [4]int // rank, local rank, size, local size
		wantKind errkind.Kind
	}{
		{"defaults", Env{}, [4]int{0, 0, 1, 1}, errkind.Unknown},
		{"set", Env{OMPIRank: "5", OMPILocalRank: "1", OMPISize: "8", OMPILocalSize: "4"}, [4]int{5, 1, 8, 4}, errkind.Unknown},
		{"python int syntax", Env{OMPIRank: " 1_0 ", OMPISize: "+16"}, [4]int{10, 0, 16, 1}, errkind.Unknown},
		{"empty is not a number", Env{OMPIRank: ""}, [4]int{}, errkind.Value},
		{"not a number", Env{OMPISize: "x"}, [4]int{}, errkind.Value},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got [4]int
			var err error
			for i, f := range []func(Env) (int, error){MPIRank, MPILocalRank, MPISize, MPILocalSize} {
				n, ferr := f(tc.env)
				got[i] = n
				err = errors.Join(err, ferr)
			}
			if tc.wantKind != errkind.Unknown {
				if err == nil || errkind.Of(err) != tc.wantKind {
					t.Fatalf("err = %v, want kind %v", err, tc.wantKind)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestEnableBPS(t *testing.T) {
	tests := []struct {
		env     Env
		want    int
		wantErr bool
	}{
		{Env{}, 0, false},
		{Env{"MONOLITH_WITH_BYTEPS": "1"}, 1, false},
		{Env{"MONOLITH_WITH_BYTEPS": "0"}, 0, false},
		{Env{"MONOLITH_WITH_BYTEPS": "yes"}, 0, true},
	}
	for _, tc := range tests {
		got, err := EnableBPS(tc.env)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("EnableBPS(%v) = %d, %v; want %d (error %v)", tc.env, got, err, tc.want, tc.wantErr)
		}
		if err != nil && errkind.Of(err) != errkind.Value {
			t.Errorf("EnableBPS(%v): error kind %v, want Value", tc.env, errkind.Of(err))
		}
	}
}

func TestCollectiveTopology(t *testing.T) {
	ompi := Env{OMPIRank: "5", OMPISize: "8", OMPILocalRank: "1", OMPILocalSize: "4"}
	with := func(base Env, kv ...string) Env {
		out := Env{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	tests := []struct {
		name     string
		env      Env
		want     Topology
		wantKind errkind.Kind
	}{
		{"single process", Env{}, Topology{0, 1, 0, 1, "single"}, errkind.Unknown},
		{"mpirun", ompi, Topology{5, 8, 1, 4, "mpi"}, errkind.Unknown},
		{"horovodrun wins over mpi", with(ompi, "HOROVOD_RANK", "2", "HOROVOD_SIZE", "3", "HOROVOD_LOCAL_RANK", "0", "HOROVOD_LOCAL_SIZE", "1"),
			Topology{2, 3, 0, 1, "horovod"}, errkind.Unknown},
		{"horovod local defaults", Env{"HOROVOD_RANK": "1", "HOROVOD_SIZE": "2"}, Topology{1, 2, 0, 1, "horovod"}, errkind.Unknown},
		// bps_init: local rank = rank % local size, local size from OMPI when BYTEPS_LOCAL_SIZE is unset.
		{"byteps from ompi", with(ompi, "MONOLITH_WITH_BYTEPS", "1", OMPILocalRank, "3"), Topology{5, 8, 1, 4, "byteps"}, errkind.Unknown},
		{"byteps local size", with(ompi, "MONOLITH_WITH_BYTEPS", "1", "BYTEPS_LOCAL_SIZE", "2"), Topology{5, 8, 1, 2, "byteps"}, errkind.Unknown},
		{"byteps without mpi", Env{"MONOLITH_WITH_BYTEPS": "1"}, Topology{}, errkind.NotFound},
		{"byteps zero local size", with(ompi, "MONOLITH_WITH_BYTEPS", "1", "BYTEPS_LOCAL_SIZE", "0"), Topology{}, errkind.Value},
		{"rank outside size", Env{OMPIRank: "8", OMPISize: "8"}, Topology{}, errkind.Value},
		{"horovod size missing", Env{"HOROVOD_RANK": "0"}, Topology{}, errkind.NotFound},
		{"bad number", Env{OMPIRank: "one", OMPISize: "2"}, Topology{}, errkind.Value},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CollectiveTopology(tc.env)
			if tc.wantKind != errkind.Unknown {
				if err == nil || errkind.Of(err) != tc.wantKind {
					t.Fatalf("CollectiveTopology = %+v, %v; want an error of kind %v", got, err, tc.wantKind)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("CollectiveTopology = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestLocalHost(t *testing.T) {
	resolved := func(addrs ...string) Resolver {
		return func(context.Context, string) ([]string, error) { return addrs, nil }
	}
	failing := func(context.Context, string) ([]string, error) { return nil, errors.New("no such host") }
	tests := []struct {
		name     string
		env      Env
		resolve  Resolver
		want     string
		wantKind errkind.Kind
		wantErr  bool
	}{
		{"cloudnative first address", Env{"CLOUDNATIVE_INET_ADDR": "127.1.1.1,fdbd::11", "YARN_INET_ADDR": "127.2.2.2"}, failing, "127.1.1.1", errkind.Unknown, false},
		{"yarn", Env{"YARN_INET_ADDR": "127.2.2.2"}, failing, "127.2.2.2", errkind.Unknown, false},
		{"empty yarn asserts", Env{"YARN_INET_ADDR": ""}, resolved("127.0.0.9"), "", errkind.Precondition, true},
		{"empty cloudnative asserts", Env{"CLOUDNATIVE_INET_ADDR": ",127.0.0.1"}, resolved("127.0.0.9"), "", errkind.Precondition, true},
		{"host name resolved", Env{}, resolved("127.0.0.9", "::1"), "127.0.0.9", errkind.Unknown, false},
		{"host name unresolvable", Env{}, failing, "", errkind.Unknown, true},
		{"host name without address", Env{}, resolved(), "", errkind.NotFound, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := LocalHost(context.Background(), tc.env, tc.resolve)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("LocalHost = %q, %v; want %q (error %v)", got, err, tc.want, tc.wantErr)
			}
			if tc.wantKind != errkind.Unknown && errkind.Of(err) != tc.wantKind {
				t.Fatalf("error kind %v, want %v", errkind.Of(err), tc.wantKind)
			}
		})
	}
}

func TestFromOS(t *testing.T) {
	t.Setenv("TRAINENV_TEST_VAR", "a=b")
	env := FromOS()
	if v, ok := env.Lookup("TRAINENV_TEST_VAR"); !ok || v != "a=b" {
		t.Fatalf("FromOS()[TRAINENV_TEST_VAR] = %q, %v; want a=b", v, ok)
	}
}
