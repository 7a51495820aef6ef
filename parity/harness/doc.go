// Package harness replays the Python goldens of agent_service (shared/parity/python, schema in its
// README.md) against Go adapters and reports, case by case, whether the Go port reproduces the
// reference.
//
// An adapter (a Func registered under the golden's `call`) reads the case input through Input and
// returns a value or an error. The harness sets input.env (unsetting every other variable the
// reference reads) and restores the environment afterwards, gives the adapter a fresh TempDir, and
// recovers panics.
//
// A value is marshalled with encoding/json and compared with the golden output structurally:
//   - numbers compare by value but must have the same literal form: a Python float is written 0.0,
//     so return Float where the reference had a float;
//   - a golden "<port>" matches a JSON integer 1..65535; inside a golden string, each "<port>" stands
//     for a decimal port number and each "<tmp>" for the case's TempDir;
//   - a golden {"error": {"type": T, "message": M}} nested in the output matches ErrorValue(err) when
//     errkind.Of(err) is the kind T maps to (KindOfPython); Value(v) is the {"value": v} counterpart.
//
// A golden exception matches a returned error of the mapped kind. Messages are compared only for
// calls the Policy marks exact (an empty reference message, a bare assert, matches any message).
//
// A case that differs is reported DECLARED when the Policy declares it by name (Declared), or when a
// Rule selects it (by call, the reference's outcome and the input) and the Go outcome meets the
// rule's expected error kind and message; rules cover cases nobody recorded yet.
package harness
