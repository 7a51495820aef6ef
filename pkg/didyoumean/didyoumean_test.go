package didyoumean

import "testing"

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "abc", 3}, {"agent_version", "agent_versoin", 1}, {"kitten", "sitting", 3},
		{"user_id", "userid", 1}, {"ab", "ba", 1}, {"日本", "日本語", 1},
	} {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func TestSuggest(t *testing.T) {
	for _, c := range []struct {
		name  string
		cands []string
		want  string
	}{
		{"userid", []string{"item_id", "user_id"}, "user_id"},
		{"USER_ID", []string{"user_id"}, "user_id"},
		{"price", []string{"prize", "rice"}, "prize"},
		{"x", []string{"y"}, ""},
		{"label", []string{"genre", "rating"}, ""},
		{"name", nil, ""},
	} {
		if got := Suggest(c.name, c.cands); got != c.want {
			t.Errorf("Suggest(%q, %q) = %q, want %q", c.name, c.cands, got, c.want)
		}
	}
}
