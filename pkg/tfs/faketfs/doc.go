// Package faketfs is a fake TensorFlow Serving: a real gRPC server implementing ModelService
// (GetModelStatus, HandleReloadConfigRequest) and PredictionService (GetModelMetadata, Predict)
// over the reference fake's model state machine (monolith/agent_service/mocked_tfserving.py).
//
// # Model state machine (ModelMgr)
//
// Every version goes UNKNOWN -> START -> LOADING -> AVAILABLE through a FIFO event queue: loading a
// model queues START for each of its versions, and handling an event queues the next one. Under the
// latest policy a version becoming AVAILABLE while the model holds more than num_versions versions
// queues UNLOADING for the oldest ones beyond N; UNLOADING queues END, and END drops the version
// (and the model with its last version). Removing a model marks it unloading and queues UNLOADING
// for each of its versions. A reload (HandleReloadConfigRequest) is a set difference of model
// names: names no longer configured are removed, new names are loaded, names in both are kept as
// they are (even when their config changed).
//
// # Versions are simulated, never discovered
//
// As in the reference, base_path is never read. A model's versions come from its version policy:
// latest N -> versions 1..N (at most MaxSimulatedVersions), all -> version 1, specific -> the
// listed versions, sorted. New versions appear only when asked for: NewVersion / NewRandomVersion
// append version last+1 to a model whose policy is not specific (the reference does so for a random
// model every 30 s; Server does it every Options.NewVersionInterval).
//
// # Time
//
// Nothing moves by itself unless asked to. Tests step the queue explicitly with ModelMgr.Step (one
// event), Tick (one round: the events queued before the call, so every version advances one state)
// or Drain (until the queue is empty). Server drives Tick from a ticker every Options.StepInterval
// when that is positive (cmd/fake_tfs does); the reference's thread instead spins on the queue
// without sleeping.
//
// Differences from the reference (all listed in specs/agent_service/mocked_tfserving.yaml): the all
// policy keeps every version (the reference raises TypeError in its event thread, which stops it);
// eviction unloads every version beyond N, not only the oldest (the same unless several versions
// become available together); a config without a version policy serves version 1 as TF Serving's
// default latest-1 policy does (the reference takes it as an empty specific list); new versions are
// added only to models that are not being removed; loading a model over an existing one drops the
// events still queued for the old one (the reference applies them to the new model, so a model
// re-added while its removal is queued is removed anyway); every state change holds the lock (the
// reference's load and remove do not); GetModelMetadata of an unknown model is NOT_FOUND (the
// reference's KeyError surfaces as UNKNOWN); Predict answers an empty response echoing the model
// spec (the reference returns None, which gRPC reports as INTERNAL).
package faketfs
