package agentstatus

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"slices"
	"time"
)

// PageRefresh is how often the status page refreshes itself.
const PageRefresh = 3 * time.Second

//go:embed page.html.tmpl
var pageSource string

// pageTemplate renders the status page. html/template escapes every value for its context: the
// report carries text from ZooKeeper and TF Serving (filters with '<', error messages).
var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"when":      when,
	"ago":       ago,
	"models":    func(m map[string]map[string][]string) []string { return slices.Sorted(maps.Keys(m)) },
	"subGraphs": func(m map[string][]string) []string { return slices.Sorted(maps.Keys(m)) },
	"newestFirst": func(recs []LogRecord) []LogRecord {
		out := slices.Clone(recs)
		slices.Reverse(out)
		return out
	},
}).Parse(pageSource))

// pageData is what the template gets.
type pageData struct {
	Report
	NoAgent bool
	Now     time.Time
	// RefreshMS and RefreshS are PageRefresh for the script and for the meta refresh.
	RefreshMS, RefreshS int64
}

// page serves the HTML status page: the same Report as /status, for people. Its inline script
// re-fetches the page every PageRefresh and swaps the content in place; without script a meta
// refresh does the same. Everything is inline: it works with no network beyond the agent.
func (h *handler) page(w http.ResponseWriter, r *http.Request) {
	d := pageData{Now: time.Now(), RefreshMS: PageRefresh.Milliseconds(), RefreshS: int64(PageRefresh.Seconds()), NoAgent: h.src == nil}
	if h.src != nil {
		d.Report = h.report(r.Context())
	}
	var body bytes.Buffer
	if err := pageTemplate.Execute(&body, d); err != nil {
		http.Error(w, "status page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(body.Bytes())
}

// when is t in UTC to the second, "never" when zero.
func when(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// ago is how long before now t was, to the second ("" when t is zero).
func ago(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t).Round(time.Second)
	if d < 0 {
		d = 0
	}
	return fmt.Sprintf("%v ago", d)
}
