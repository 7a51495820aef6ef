package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// Rule declares a class of intentional differences (a spec's parity rule), so that it also covers
// cases nobody has recorded yet. A case that differs from the reference and has no case
// declaration is declared by the first rule, in policy order, that selects it (Selects) and whose
// expectation the Go outcome meets; when rules select it but none is met, the case fails naming them.
type Rule struct {
	Name, Symbol, Why string
	// Calls are the golden calls the rule covers.
	Calls []string
	// Reference is what the reference must have done: "" (anything), RefValue, RefError, or the
	// Python exception class it raised.
	Reference string
	// Input lists conditions on the case input, all of which must hold.
	Input []InputMatch
	// ExpectError, when set, is the errkind name the Go call must fail with.
	ExpectError string
	// ExpectMessage, when set, must match (find) the Go error's message.
	ExpectMessage *regexp.Regexp
}

// InputMatch requires the case input Key to contain a match of Match: a JSON string is matched as
// its text, any other JSON value as its compact JSON text; an absent key never matches.
type InputMatch struct {
	Key   string
	Match *regexp.Regexp
}

// Rule reference outcomes besides a Python exception class.
const (
	RefValue = "value"
	RefError = "error"
)

// Selects reports whether the rule's conditions on the call, the reference outcome and the input
// hold for c.
func (r *Rule) Selects(c *Case) bool {
	if !slices.Contains(r.Calls, c.Call) {
		return false
	}
	switch r.Reference {
	case "":
	case RefValue:
		if c.Error != nil {
			return false
		}
	case RefError:
		if c.Error == nil {
			return false
		}
	default:
		if c.Error == nil || c.Error.Type != r.Reference {
			return false
		}
	}
	for _, m := range r.Input {
		raw, ok := c.Input[m.Key]
		if !ok || !m.Match.MatchString(inputText(raw)) {
			return false
		}
	}
	return true
}

// unmet says how the Go outcome misses the rule's expectation ("" when it meets it).
func (r *Rule) unmet(out outcome) string {
	if r.ExpectError == "" {
		return ""
	}
	want, err := errkind.Parse(r.ExpectError)
	if err != nil {
		return err.Error()
	}
	if out.err == nil || errkind.Of(out.err) != want {
		return fmt.Sprintf("it expects an error of kind %s, got %s", want, out)
	}
	if r.ExpectMessage != nil && !r.ExpectMessage.MatchString(out.err.Error()) {
		return fmt.Sprintf("it expects a message matching %q, got %q", r.ExpectMessage, out.err.Error())
	}
	return ""
}

func inputText(raw json.RawMessage) string {
	var s string
	if isJSONString(raw) && json.Unmarshal(raw, &s) == nil {
		return s
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// ruleVerdict declares a differing case by the first rule that selects it and is met. ok is false
// when no rule selects the case; a case that rules select but none meets fails, naming them.
func ruleVerdict(res Result, c *Case, out outcome, rules []Rule, summary string) (Result, bool) {
	var unmet []string
	for i := range rules {
		r := &rules[i]
		if !r.Selects(c) {
			continue
		}
		if why := r.unmet(out); why != "" {
			unmet = append(unmet, fmt.Sprintf("rule %s of %s not met: %s", r.Name, r.Symbol, why))
			continue
		}
		res.Status, res.Detail, res.Rule = StatusDeclared, "rule "+r.Name+": "+r.Why, r.Name
		return res, true
	}
	if len(unmet) == 0 {
		return res, false
	}
	return failed(res, summary+"; "+strings.Join(unmet, "; ")), true
}
