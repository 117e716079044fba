package gen

import "testing"

func TestArticle(t *testing.T) {
	for word, want := range map[string]string{
		"AttnKV":    "an AttnKV",
		"Events":    "an Events",
		"Recurrent": "a Recurrent",
		"session":   "a session",
		"owner":     "an owner",
		"Update":    "an Update",
		"User":      "a User",
		"Unit":      "a Unit",
		"":          "",
	} {
		if got := article(word); got != want {
			t.Errorf("article(%q) = %q, want %q", word, got, want)
		}
	}
}
