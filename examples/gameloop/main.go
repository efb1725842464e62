// Command gameloop plays a small tabletop game, a Dungeon Master and three
// players, and saves the whole game after every turn, so that it can be
// stopped at any moment (Ctrl-C, a crash, kill -9) and started again from the
// last turn it finished.
//
// A campaign is a directory of numbered sessions, each a checkpoint store
// with one self-contained JSON file per turn, never modified once written,
// and a session.json holding the session's progress (its turn and scene)
// and, for a fork, the session and turn it came from:
//
//	campaigns/001/session.json  campaigns/001/turn_001.json  turn_002.json ...
//	campaigns/002/session.json  campaigns/002/turn_001.json ...
//
// Without flags a run goes on with the most recently active session, or
// starts session 001 in an empty campaign:
//
//	go run ./examples/gameloop               # session 001, turns 1-5
//	go run ./examples/gameloop               # resumes session 001: turns 6-10
//	go run ./examples/gameloop -new          # a fresh game in session 002
//	go run ./examples/gameloop -session 001  # goes on with session 001
//	go run ./examples/gameloop -restore 3    # forks the most recent session at turn 3, plays turn 4 onwards
//	go run ./examples/gameloop -turns 2 -dir /tmp/campaigns
//
// -restore N (with -session ID to pick the session) copies turns 1 to N
// into a new session and plays on there: the turns after N of the original
// session stay as they were. If the most recent session is damaged, a run
// without flags says so, leaves it alone and starts a new session.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gocheckpoint/checkpoint"
)

// shownSessions is how many sessions the summary at the end of a run lists.
const shownSessions = 5

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gameloop:", err)
		os.Exit(1)
	}
}

// run plays -turns turns of the game in one session of the campaign in
// -dir, chosen by the flags, records the game's progress in the session's
// metadata and lists the campaign's sessions.
func run(ctx context.Context, args []string, stdout io.Writer) (err error) {
	fs := flag.NewFlagSet("gameloop", flag.ContinueOnError)
	fs.SetOutput(stdout)
	dir := fs.String("dir", "campaigns", "directory that holds the campaign's sessions")
	turns := fs.Int64("turns", 5, "how many turns to play in this run")
	newGame := fs.Bool("new", false, "start a fresh game in a new session")
	sessionID := fs.String("session", "", "play session `ID` instead of the most recent one")
	restore := fs.Int64("restore", 0, "fork the session at turn `N` into a new session and play on from turn N+1")
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q (flags only; -h lists them)", fs.Arg(0))
	case *turns < 0:
		return fmt.Errorf("-turns %d: want 0 or more", *turns)
	case set["restore"] && *restore < 1:
		return fmt.Errorf("-restore %d: want a turn, 1 or more", *restore)
	case *newGame && (set["session"] || set["restore"]):
		return errors.New("-new starts a fresh game: it cannot be combined with -session or -restore")
	}

	campaign, err := checkpoint.OpenSessions(*dir, append(campaignOptions(), warnOnError(stdout))...)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := campaign.Close(); err == nil {
			err = cerr
		}
	}()

	var t *table
	switch {
	case set["restore"]:
		t, err = forkAt(ctx, campaign, *sessionID, *restore, stdout)
	case *newGame:
		t, err = startSession(ctx, campaign, stdout)
	case set["session"]:
		t, err = openTable(ctx, campaign, *sessionID, stdout)
		if err != nil {
			err = fmt.Errorf("-session %s: %w", *sessionID, err)
		}
	default:
		t, err = resumeLatest(ctx, campaign, stdout)
	}
	if err != nil {
		return err
	}
	defer func() {
		if cerr := t.store.Close(); err == nil {
			err = cerr
		}
	}()

	game := &t.game
	var stopped error
	first := game.Turn + 1
	for turn := first; turn < first+*turns; turn++ {
		// Stop between turns, never inside one: every saved turn is whole.
		if err := ctx.Err(); err != nil {
			stopped = fmt.Errorf("stopped before turn %d; run again to resume session %s after turn %d: %w", turn, t.id, game.Turn, err)
			break
		}
		events := game.PlayTurn(turn)
		game.printTurn(stdout, events)

		// SaveEvery(1), the default, makes every turn due: each Tick writes
		// turn_NNN.json, and no turn already saved is ever rewritten.
		info, saved, err := t.store.Tick(ctx, turn, *game)
		if err != nil {
			return err
		}
		if saved {
			fmt.Fprintf(stdout, "  saved %s (%d bytes)\n", info.Location, info.Size)
		}
	}

	// The progress goes into session.json even when the run was stopped:
	// it is one small write as the program ends, like SaveFinal.
	progress := map[string]string{"turn": strconv.FormatInt(game.Turn, 10)}
	if game.Scene != "" {
		progress["scene"] = game.Scene
	}
	if err := campaign.SetMeta(context.WithoutCancel(ctx), t.id, progress); err != nil {
		return err
	}
	if stopped != nil {
		return stopped
	}
	if err := printSessions(ctx, campaign, stdout); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "run again to play turn %d onwards; -new starts a new session, -restore N goes back to turn N\n", game.Turn+1)
	return nil
}

// table is the session being played: its store and the game in it.
type table struct {
	id    string
	store *checkpoint.Store[GameState]
	game  GameState
}

// warnOnError prints every failure the stores meet, and every damaged turn
// that Latest passes over to resume from the turn before it: without it, a
// run would resume from an older turn without a word.
func warnOnError(stdout io.Writer) checkpoint.Option {
	return checkpoint.WithHooks(checkpoint.Hooks{OnError: func(err error) {
		fmt.Fprintf(stdout, "warning: %s\n", strings.ReplaceAll(err.Error(), "\n", "\n  "))
	}})
}

// resumeLatest opens the most recently active session at its latest turn.
// An empty campaign starts session 001; a damaged session is left as it is
// and a new one is started, so that one bad directory never stops play.
func resumeLatest(ctx context.Context, campaign *checkpoint.Sessions, stdout io.Writer) (*table, error) {
	store, s, err := checkpoint.ResumeLatestSession[GameState](ctx, campaign)
	switch {
	case errors.Is(err, checkpoint.ErrNotFound):
		return startSession(ctx, campaign, stdout)
	case errors.Is(err, checkpoint.ErrCorrupt):
		return replaceDamaged(ctx, campaign, s.ID, err, stdout)
	case err != nil:
		return nil, err // ErrLocked if another gameloop is playing it
	}
	t, err := load(ctx, store, s.ID, stdout)
	if errors.Is(err, checkpoint.ErrCorrupt) { // no turn of it loads
		return replaceDamaged(ctx, campaign, s.ID, err, stdout)
	}
	return t, err
}

// replaceDamaged says why session id cannot be resumed and starts a new
// session instead; the damaged one keeps its files for inspection.
func replaceDamaged(ctx context.Context, campaign *checkpoint.Sessions, id string, damage error, stdout io.Writer) (*table, error) {
	fmt.Fprintf(stdout, "session %s is damaged; leaving it as it is and starting a new session:\n  %s\n",
		id, strings.ReplaceAll(damage.Error(), "\n", "\n  "))
	return startSession(ctx, campaign, stdout)
}

// startSession creates the next numbered session and a fresh game in it.
func startSession(ctx context.Context, campaign *checkpoint.Sessions, stdout io.Writer) (*table, error) {
	s, err := campaign.New(ctx, map[string]string{"turn": "0"})
	if err != nil {
		return nil, err
	}
	return openTable(ctx, campaign, s.ID, stdout)
}

// forkAt forks session from (the most recent one if from is empty) at turn
// into a new session, and opens the new session at that turn.
func forkAt(ctx context.Context, campaign *checkpoint.Sessions, from string, turn int64, stdout io.Writer) (*table, error) {
	if from == "" {
		list, err := campaign.List(ctx)
		if err != nil {
			return nil, err
		}
		if len(list) == 0 {
			return nil, fmt.Errorf("-restore %d: %s holds no session to restore", turn, campaign.Location())
		}
		from = list[0].ID
	}
	s, err := campaign.Fork(ctx, from, turn, map[string]string{"turn": strconv.FormatInt(turn, 10)})
	if errors.Is(err, checkpoint.ErrNotFound) {
		// Say which: no such session, or no such turn in it.
		parent, gerr := campaign.Get(ctx, from)
		if gerr != nil {
			return nil, fmt.Errorf("-restore %d: %w", turn, gerr)
		}
		last := "it has none yet"
		if parent.Checkpoints > 0 {
			last = fmt.Sprintf("its last is turn %d", parent.LastStep)
		}
		return nil, fmt.Errorf("-restore %d: session %s has no checkpoint of turn %d (%s): %w",
			turn, from, turn, last, checkpoint.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("-restore %d: cannot restore turn %d of session %s: %w", turn, turn, from, err)
	}
	fmt.Fprintf(stdout, "forked session %s at turn %d into session %s; the turns of %s are left as they were\n", from, turn, s.ID, from)
	return openTable(ctx, campaign, s.ID, stdout)
}

// openTable opens session id at its latest turn.
func openTable(ctx context.Context, campaign *checkpoint.Sessions, id string, stdout io.Writer) (*table, error) {
	store, err := checkpoint.OpenSessionStore[GameState](campaign, id)
	if err != nil {
		return nil, err
	}
	return load(ctx, store, id, stdout)
}

// load reads the latest turn of session id from store, or starts a fresh
// game if it has none. On error it closes store.
func load(ctx context.Context, store *checkpoint.Store[GameState], id string, stdout io.Writer) (*table, error) {
	game, info, err := store.Latest(ctx)
	switch {
	case errors.Is(err, checkpoint.ErrNotFound):
		game = NewGame(id)
		fmt.Fprintf(stdout, "starting a fresh game in session %s (%s)\n", id, store.Location())
	case err != nil:
		store.Close()
		return nil, err
	default:
		game.Session = id // a forked session's first turns were played in its parent
		fmt.Fprintf(stdout, "resuming session %s from turn %d (saved %s)\n",
			id, info.Step, info.Time.Local().Format("2006-01-02 15:04:05 MST"))
		game.printParty(stdout)
	}
	return &table{id: id, store: store, game: game}, nil
}

// printSessions lists the campaign's sessions, the most recently active
// first, one line each.
func printSessions(ctx context.Context, campaign *checkpoint.Sessions, stdout io.Writer) error {
	list, err := campaign.List(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "sessions in %s, most recent first:\n", campaign.Location())
	for i, s := range list {
		if i == shownSessions {
			fmt.Fprintf(stdout, "  … and %d older\n", len(list)-i)
			break
		}
		fmt.Fprintf(stdout, "  %-4s %s\n", s.ID, describe(s))
	}
	return nil
}

// describe sums up a session: "turn 5 (the Clockwork Bridge), 5
// checkpoints, forked from 001 at turn 3".
func describe(s checkpoint.Session) string {
	if s.Err != nil {
		return fmt.Sprintf("damaged: %v", s.Err)
	}
	if s.Checkpoints == 0 {
		return "no turn played yet"
	}
	text := fmt.Sprintf("turn %d", s.LastStep)
	// The scene is the progress SetMeta wrote; a run that crashed before
	// writing it leaves it a few turns behind the checkpoints.
	if s.Meta["turn"] == strconv.FormatInt(s.LastStep, 10) && s.Meta["scene"] != "" {
		text += " (" + s.Meta["scene"] + ")"
	}
	text += fmt.Sprintf(", %d checkpoint", s.Checkpoints)
	if s.Checkpoints != 1 {
		text += "s"
	}
	if s.Parent != "" {
		text += fmt.Sprintf(", forked from %s at turn %d", s.Parent, s.ParentStep)
	}
	return text
}

// GameState is the whole game: restoring it restores the story, the
// characters and every agent's memory. It holds no wall-clock time and its
// dice depend only on Seed and the turn, so a game resumed from a checkpoint
// plays on exactly as if it had never stopped.
type GameState struct {
	// Session is the ID of the session the game is played in ("001"); a
	// forked game takes its new session's ID.
	Session string `json:"session"`
	// Turn is the number of turns played.
	Turn int64 `json:"turn"`
	// Seed makes the dice repeatable.
	Seed uint64 `json:"seed"`
	// WorldTime is the clock inside the story.
	WorldTime time.Time `json:"world_time"`
	Scene     string    `json:"scene"`
	// TurnQueue is who acts in a turn, in order: the DM, then the players.
	TurnQueue []string `json:"turn_queue"`
	// Log is the ground truth: everything that happened, whispers included.
	Log        []string               `json:"ground_truth_log"`
	Memories   map[string]AgentMemory `json:"agent_memories"`
	Characters map[string]Character   `json:"characters"`
}

// AgentMemory is what one agent (the DM or a player) remembers. Agents
// remember differently: only the DM and its target know a whisper.
type AgentMemory struct {
	LongTermSummary string   `json:"long_term_summary"`
	ShortTermBuffer []string `json:"short_term_buffer"`
	Whispers        []string `json:"whispers,omitempty"`
}

// Character is a player character's sheet. Its hit points changed in
// schema 2: see schema.go.
type Character struct {
	Name      string    `json:"name"`
	Class     string    `json:"class"`
	Bonus     int       `json:"bonus"`
	HP        HitPoints `json:"hp"`
	XP        int       `json:"xp"`
	Inventory []string  `json:"inventory"`
}

const (
	// shortTermTurns is how many turns an agent remembers in detail.
	shortTermTurns = 3
	// turnsPerDay: a turn is four hours of the story.
	turnsPerDay = 6
)

const dm = "dm"

// NewGame returns the state before turn 1.
func NewGame(session string) GameState {
	g := GameState{
		Session:   session,
		Seed:      20240601,
		WorldTime: time.Date(1492, time.March, 3, 4, 0, 0, 0, time.UTC),
		TurnQueue: []string{dm, "brynja", "kael", "zoe"},
		Log:       []string{},
		Memories:  make(map[string]AgentMemory),
		Characters: map[string]Character{
			"brynja": {Name: "Brynja", Class: "fighter", Bonus: 3, HP: HitPoints{Current: 12, Max: 12}, Inventory: []string{"longsword", "shield with a 🐺 on it"}},
			"kael":   {Name: "Kael", Class: "wizard", Bonus: 2, HP: HitPoints{Current: 8, Max: 8}, Inventory: []string{"spellbook", "chalk"}},
			"zoe":    {Name: "Zoë", Class: "rogue", Bonus: 4, HP: HitPoints{Current: 10, Max: 10}, Inventory: []string{"lockpicks", "rope (15 m)"}},
		},
	}
	for _, id := range g.TurnQueue {
		g.Memories[id] = AgentMemory{ShortTermBuffer: []string{}}
	}
	return g
}

// scene is one stop on the party's road. Turn t is played in scene
// (t-1) mod len(scenes): the road loops.
type scene struct {
	name      string
	narration string
	dc        int
	actions   map[string]string // by class
	loot      string
	secret    string // whispered to one player
}

var scenes = []scene{
	{
		name:      "the Lantern Road",
		narration: "Rain needles the Lantern Road; a cart lies overturned and its oxen are gone.",
		dc:        12,
		actions:   map[string]string{"fighter": "heaves the cart upright", "wizard": "reads the wet runes on the axle", "rogue": "tracks the oxen into the birches"},
		loot:      "a brass key",
		secret:    "the carter was paid to tip the cart",
	},
	{
		name:      "the Drowned Chapel",
		narration: "Bells ring under black water; the chapel door is barred from within.",
		dc:        14,
		actions:   map[string]string{"fighter": "shoulders the barred door", "wizard": "names the drowned saint aloud", "rogue": "slips through a broken window"},
		loot:      "a silver bell",
		secret:    "the bells ring for someone still alive",
	},
	{
		name:      "Mossgate Market",
		narration: "Mossgate Market is loud with haggling — and one stall sells maps of places that do not exist.",
		dc:        11,
		actions:   map[string]string{"fighter": "stares down the map-seller", "wizard": "checks a map against the stars", "rogue": "lifts the seller's ledger"},
		loot:      "a map to Ærøskøbing",
		secret:    "the map-seller is the carter, in a wig",
	},
	{
		name:      "the Salt Caves",
		narration: "The Salt Caves glitter; something large breathes in the dark…",
		dc:        15,
		actions:   map[string]string{"fighter": "raises her shield toward the breathing", "wizard": "conjures a lantern of blue fire", "rogue": "counts the echoes to find the exit"},
		loot:      "a salt-crusted crown",
		secret:    "the breathing thing is only the tide",
	},
	{
		name:      "the Clockwork Bridge",
		narration: "The Clockwork Bridge folds itself away a plank at a time; the far bank is 30 m off.",
		dc:        13,
		actions:   map[string]string{"fighter": "jams her sword into the gears", "wizard": "asks the bridge politely to stop", "rogue": "runs the vanishing planks"},
		loot:      "a tiny gear that still turns",
		secret:    "the bridge obeys whoever carries the brass key",
	},
	{
		name:      "the Ember Tower",
		narration: "At the Ember Tower the door is warm to the touch; someone is cooking inside.",
		dc:        12,
		actions:   map[string]string{"fighter": "knocks, twice, loudly", "wizard": "smells the smoke for sorcery", "rogue": "climbs to the kitchen window"},
		loot:      "a jar of dragon pepper",
		secret:    "the cook is the missing oxen's owner",
	},
}

// event is one line of a turn, as it goes into the log.
type event struct {
	who  string // an agent
	to   string // for a whisper: the one agent who hears it
	text string
}

// PlayTurn plays turn and records it in the game: the DM narrates, every
// player acts and rolls against the scene, and every agent remembers the
// turn. It returns what happened, in order.
func (g *GameState) PlayTurn(turn int64) []event {
	// One random stream per turn: the dice of a turn depend only on the seed
	// and the turn, not on how many runs it took to get here.
	rng := rand.New(rand.NewPCG(g.Seed, uint64(turn)))
	sc := scenes[int((turn-1)%int64(len(scenes)))]
	g.Turn = turn
	g.WorldTime = g.WorldTime.Add(24 * time.Hour / turnsPerDay)
	g.Scene = sc.name

	players := g.TurnQueue[1:]
	events := []event{{who: dm, text: sc.narration}}
	if turn > 1 && (turn-1)%turnsPerDay == 0 {
		events = append(events, event{who: dm, text: "Dawn. The party rests and is whole again."})
		for _, id := range players {
			c := g.Characters[id]
			c.HP.Current = c.HP.Max
			g.Characters[id] = c
		}
	}
	var whisperTo string
	if turn%2 == 0 {
		whisperTo = players[int(turn/2)%len(players)]
		events = append(events, event{who: dm, to: whisperTo, text: sc.secret})
	}

	var outcomes []string            // "Brynja ✓", in turn order
	marks := make(map[string]string) // by player: ✓ or ✗
	for _, id := range players {
		c := g.Characters[id]
		roll := rng.IntN(20) + 1
		text := fmt.Sprintf("🎲%2d+%d %s (DC %d): ", roll, c.Bonus, sc.actions[c.Class], sc.dc)
		if roll+c.Bonus >= sc.dc {
			c.XP += 10
			text += "success, +10 XP"
			if !g.anyoneHas(sc.loot) {
				c.Inventory = append(c.Inventory, sc.loot)
				text += ", finds " + sc.loot
			}
			marks[id] = "✓"
		} else {
			hurt := 1 + rng.IntN(3)
			c.HP.Current = max(1, c.HP.Current-hurt)
			text += fmt.Sprintf("fails, -%d HP (%d/%d)", hurt, c.HP.Current, c.HP.Max)
			marks[id] = "✗"
		}
		g.Characters[id] = c
		outcomes = append(outcomes, c.Name+" "+marks[id])
		events = append(events, event{who: id, text: text})
	}

	for _, e := range events {
		g.Log = append(g.Log, fmt.Sprintf("[turn %d] %s: %s", turn, g.label(e), e.text))
	}
	g.remember(dm, fmt.Sprintf("turn %d, %s: %s", turn, sc.name, strings.Join(outcomes, ", ")))
	for _, id := range players {
		c := g.Characters[id]
		g.remember(id, fmt.Sprintf("turn %d, %s: %s %s %s", turn, sc.name, c.Name, sc.actions[c.Class], marks[id]))
	}
	if whisperTo != "" {
		for _, id := range []string{dm, whisperTo} {
			m := g.Memories[id]
			m.Whispers = append(m.Whispers, fmt.Sprintf("turn %d: %s", turn, sc.secret))
			g.Memories[id] = m
		}
	}
	return events
}

func (g *GameState) anyoneHas(item string) bool {
	for _, c := range g.Characters {
		if slices.Contains(c.Inventory, item) {
			return true
		}
	}
	return false
}

// remember adds a turn to an agent's short-term memory; the oldest turn
// beyond shortTermTurns is folded into the long-term summary.
func (g *GameState) remember(id, note string) {
	m := g.Memories[id]
	m.ShortTermBuffer = append(m.ShortTermBuffer, note)
	if n := len(m.ShortTermBuffer) - shortTermTurns; n > 0 {
		m.ShortTermBuffer = slices.Delete(m.ShortTermBuffer, 0, n)
		folded := g.Turn - shortTermTurns
		var places []string
		for t := int64(1); t <= folded && t <= int64(len(scenes)); t++ {
			places = append(places, scenes[t-1].name)
		}
		m.LongTermSummary = fmt.Sprintf("Turns 1–%d, in brief: %s.", folded, strings.Join(places, ", "))
	}
	g.Memories[id] = m
}

func (g *GameState) name(id string) string {
	if id == dm {
		return "DM"
	}
	if c, ok := g.Characters[id]; ok {
		return c.Name
	}
	return id
}

// label names who speaks in e: "Zoë", or "DM ⇢ Kael" for a whisper.
func (g *GameState) label(e event) string {
	if e.to != "" {
		return g.name(e.who) + " ⇢ " + g.name(e.to)
	}
	return g.name(e.who)
}

func (g *GameState) printTurn(w io.Writer, events []event) {
	fmt.Fprintf(w, "── turn %d · %s · %s ──\n", g.Turn, g.Scene, g.WorldTime.Format("2 January, 15:04"))
	for _, e := range events {
		fmt.Fprintf(w, "  %-12s %s\n", g.label(e), e.text)
	}
}

func (g *GameState) printParty(w io.Writer) {
	for _, id := range g.TurnQueue[1:] {
		c := g.Characters[id]
		m := g.Memories[id]
		last := "nothing yet"
		if n := len(m.ShortTermBuffer); n > 0 {
			last = m.ShortTermBuffer[n-1]
		}
		fmt.Fprintf(w, "  %-6s %s, %d/%d HP, %d XP; remembers %q\n", c.Name, c.Class, c.HP.Current, c.HP.Max, c.XP, last)
	}
}
