package chaos

// History records the operations the workers run on Redis, as their links
// see them.
type History struct{}

func (h *History) tap(string) Tap { return nil }
