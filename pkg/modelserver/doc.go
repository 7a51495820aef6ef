// Package modelserver is a model server the agent can run in place of tensorflow_model_server: a
// gRPC server with TF Serving's ModelService (GetModelStatus, HandleReloadConfigRequest) and
// PredictionService (Predict, GetModelMetadata) over models loaded from their base paths, as TF
// Serving loads them, but of this project's export format (pkg/export) instead of TensorFlow
// SavedModels. cmd/model_server is its binary.
//
// # Versions and states
//
// A model is a ModelConfig of the served ModelServerConfig (name, base_path, version policy,
// version labels). Its versions are the numerically named subdirectories of its base path
// (modelconfig.VersionDirs: TF Serving's file system source; "temp-..." directories and files are
// none), listed when the config changes and every file system poll interval. Its policy picks the
// aspired versions: latest N (the N newest that load; N 0 is 1), all, specific (the listed ones
// present; the agent resolves its latest_once to specific), none (latest 1). Each version goes
//
//	START -> LOADING -> AVAILABLE -> UNLOADING -> END
//
// START while it waits for a load slot (--num_load_threads), LOADING while its Loader runs in its
// own goroutine (a large PS shard holds back neither the status calls nor the other models),
// AVAILABLE once loaded, UNLOADING when no longer aspired (no new request gets it; those in flight
// finish), END once closed. A load that fails ends in END with an error status whose message names
// the model, version and directory; a failure that may pass (not IsPermanent: an I/O error, not a
// corrupt export) is retried --max_num_load_retries times first. A failed version is tried again
// only under a new config of its model, and stays in GetModelStatus (END, its error) while it is on
// disk, however many versions come after it. A version no longer aspired while
// loading is cancelled (END, no error). An available version no longer aspired is unloaded once an
// aspired version is available, or at once when the model has none left (a new version that fails
// to load leaves the old one serving: TF Serving's availability-preserving policy). A base path that
// cannot be listed changes nothing (a file system glitch must not unload what serves).
//
// # Differences from TF Serving
//
//   - HandleReloadConfigRequest returns once the new config is applied and the versions found are
//     START or LOADING; TF Serving waits until new models are loaded (and can hang for as long).
//   - The server serves at once; TF Serving opens its port only once the initial models loaded.
//   - --num_load_threads 0 means no bound (TF Serving: loads one at a time).
//   - Under the latest policy a version that fails to load is skipped: the next newest takes its
//     place among the aspired versions, at start, on a reload and when a new version appears, so
//     the server serves the newest versions that load and a failed one is never left the only
//     aspired one. TF Serving keeps aspiring the failed version: an old version that serves keeps
//     serving, but started with a corrupt newest version on disk it serves nothing ("Servable not
//     found for request: Latest(...)").
//   - GetModelMetadata also answers the reference fake's fields (model_name, base_path, version,
//     state, signature_name, num_versions) for tfs_client's meta command, as Python reprs.
//
// # Servables
//
// A version is served by a Servable (Predict, Signatures, Close) that a Loader builds from its
// directory; loaders are registered by the model's sub-graph kind (KindOf: KindEntry for "entry",
// KindPS for "ps_<i>", from the model's name or its base path). pkg/modelserver/psshard serves a
// PS shard's embedding lookups, pkg/modelserver/entry the entry's predictions.
package modelserver
