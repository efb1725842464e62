package benchkit

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
)

// World is the benchmark's state: a simulation of agents, each with a
// role, goals, a memory of what happened and an inventory, and a log. Its
// text is drawn from a small vocabulary, so that it compresses like real
// agent state rather than like repeated bytes.
type World struct {
	Turn   int64    `json:"turn"`
	Seed   uint64   `json:"seed"`
	Agents []Agent  `json:"agents"`
	Log    []string `json:"log"`
}

// Agent is one member of a World.
type Agent struct {
	Name      string         `json:"name"`
	Role      string         `json:"role"`
	HP        int            `json:"hp"`
	Position  [2]float64     `json:"position"`
	Goals     []string       `json:"goals"`
	Memory    []string       `json:"memory"`
	Inventory map[string]int `json:"inventory"`
}

var (
	words = strings.Fields(`the a north south east west river tower crypt market gate
		goblin dragon merchant guard healer smith scout thief king queen village forest
		saw met traded fought fled found lost built heard said asked promised remembered
		gold silver bread rope torch sword shield map key potion letter ring coin fish
		quickly slowly quietly twice again before after during near under over beyond`)
	roles = []string{"scout", "merchant", "guard", "healer", "smith", "thief", "bard", "mage"}
	items = []string{"gold", "rope", "torch", "bread", "potion", "arrow", "map", "key", "gem", "herb"}
)

func sentence(r *rand.Rand, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[r.IntN(len(words))])
	}
	return b.String()
}

func newAgent(r *rand.Rand, i int) Agent {
	a := Agent{
		Name:      fmt.Sprintf("agent-%05d", i),
		Role:      roles[r.IntN(len(roles))],
		HP:        r.IntN(100),
		Position:  [2]float64{r.Float64() * 1000, r.Float64() * 1000},
		Inventory: make(map[string]int),
	}
	for j := 0; j < 3; j++ {
		a.Goals = append(a.Goals, sentence(r, 4))
	}
	for j := 0; j < 8; j++ {
		a.Memory = append(a.Memory, sentence(r, 12))
	}
	for j := 0; j < 4; j++ {
		a.Inventory[items[r.IntN(len(items))]] += 1 + r.IntN(20)
	}
	return a
}

// NewWorld returns a World whose JSON encoding is about size bytes.
func NewWorld(size int) World {
	r := rand.New(rand.NewPCG(1, uint64(size)))
	w := World{Turn: 1, Seed: uint64(size)}
	for i := 0; i < 10; i++ {
		w.Log = append(w.Log, sentence(r, 10))
	}
	for encodedSize(w) < size {
		w.Agents = append(w.Agents, newAgent(r, len(w.Agents)))
		if n := len(w.Agents); n == 16 {
			// Extrapolate, then top up one agent at a time.
			per := (encodedSize(w) - encodedSize(World{Log: w.Log})) / n
			for len(w.Agents) < size/per-1 {
				w.Agents = append(w.Agents, newAgent(r, len(w.Agents)))
			}
		}
	}
	return w
}

func encodedSize(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return len(b)
}
