package testkit

// CorpusState is the state of the damaged-file corpus's checkpoints.
type CorpusState struct {
	Turn   int64             `json:"turn"`
	Agents map[string]string `json:"agents"`
	Log    []string          `json:"log"`
}

// CorpusStateAt returns the corpus's state of turn.
func CorpusStateAt(turn int64) CorpusState {
	return CorpusState{Turn: turn, Agents: map[string]string{"dm": "narrates", "ana": "sneaks"}, Log: []string{"a", "b"}}
}
