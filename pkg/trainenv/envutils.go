package trainenv

import "log/slog"

// GeneratePSMFromUUID is env_utils.generate_psm_from_uuid: the open-source reference names a job's
// service (its psm, the Consul service name) by the job's uuid unchanged.
func GeneratePSMFromUUID(uuid string) string { return uuid }

// ZKAuth is one ZooKeeper credential: kazoo's auth_data entry (scheme, credential).
type ZKAuth struct {
	Scheme     string
	Credential string
}

// ZKAuthData is env_utils.get_zk_auth_data: digest credentials "user:password" from ZK_AUTH, or
// nil when ZK_AUTH is unset or empty. The reference printed the credential to stdout; this logs
// only that one is used.
func ZKAuthData(env Env) []ZKAuth {
	auth := env.Get("ZK_AUTH")
	if auth == "" {
		return nil
	}
	slog.Debug("ZooKeeper digest credentials from ZK_AUTH are used")
	return []ZKAuth{{Scheme: "digest", Credential: auth}}
}
