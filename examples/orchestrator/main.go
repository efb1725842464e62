// Command orchestrator works a small team of AI agents through a sprint of
// seven stories, one story per step, and checkpoints the sprint as it goes:
// a numbered checkpoint every -every steps, a final checkpoint for the last
// step, and result.json once the sprint is done. -stop-after K simulates a
// crash after step K; running it again without the flag finishes the sprint
// from the latest checkpoint.
//
//	go run ./examples/orchestrator -stop-after 3   # exits 1 after story 3
//	go run ./examples/orchestrator                 # resumes at story 4
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/gocheckpoint/checkpoint"
)

const sprintID = "sprint_001"

// errCrash is what -stop-after returns: the run ends as if the process had
// died, without any chance to save more.
var errCrash = errors.New("simulated crash")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "orchestrator:", err)
		os.Exit(1)
	}
}

// run works through the sprint in -dir, resuming from the latest checkpoint
// if there is one, and writes result.json when every story is done.
func run(ctx context.Context, args []string, stdout io.Writer) (err error) {
	fs := flag.NewFlagSet("orchestrator", flag.ContinueOnError)
	fs.SetOutput(stdout)
	dir := fs.String("dir", "runs", "directory that holds the sprints")
	every := fs.Int64("every", 2, "save a numbered checkpoint every N steps (0: only the final one)")
	// Rolling is on by default. A step here stands for agent calls that
	// cost time and tokens and do not give the same answer twice, so
	// redoing one after a crash is the expensive outcome. WithRolling keeps
	// the numbered checkpoints at the interval (the history to roll back
	// to) and also replaces one file, step_last.json, on every other step,
	// so a crash loses at most the step in progress. -rolling=false shows
	// the plain interval, where up to every-1 finished steps are redone.
	rolling := fs.Bool("rolling", true, "also keep the latest step in step_last.json, so no finished step is lost")
	stopAfter := fs.Int64("stop-after", 0, "simulate a crash after finishing step K (0: never)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *stopAfter < 0 {
		return fmt.Errorf("-stop-after %d: want 0 (never) or a step", *stopAfter)
	}

	opts := []checkpoint.Option{checkpoint.WithLayout("step", 3), checkpoint.SaveEvery(*every)}
	if *rolling {
		opts = append(opts, checkpoint.WithRolling())
	}
	store, err := checkpoint.Open[Sprint](filepath.Join(*dir, sprintID), opts...)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := store.Close(); err == nil {
			err = cerr
		}
	}()

	sprint, info, err := store.Latest(ctx)
	switch {
	case errors.Is(err, checkpoint.ErrNotFound):
		sprint = NewSprint(sprintID)
		fmt.Fprintf(stdout, "%s: no checkpoint in %s, starting the sprint: %d stories\n", sprintID, store.Location(), len(sprint.Stories))
	case err != nil:
		return err
	case sprint.Done():
		// The last run saved its final checkpoint but may have died before
		// result.json was written: write it (again), it is idempotent.
		fmt.Fprintf(stdout, "%s is already complete (%s checkpoint of step %d)\n", sprintID, info.Kind, info.Step)
		return writeResult(ctx, stdout, store, sprint, info)
	default:
		fmt.Fprintf(stdout, "resuming at story %d of %d (%s); %s\n",
			sprint.Step+1, len(sprint.Stories), describe(info), redone(info, *every, *rolling))
	}
	sprint.Runs++

	total := int64(len(sprint.Stories))
	for step := sprint.Step + 1; step <= total; step++ {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("stopped before step %d: %w", step, err)
		}
		sprint.Work(step)
		s := sprint.Stories[step-1]
		d := sprint.Decisions[len(sprint.Decisions)-1]
		fmt.Fprintf(stdout, "step %d/%d  %s %s (%d pts) → %s: %s\n", step, total, s.ID, s.Title, s.Points, s.Agent, s.Output)
		fmt.Fprintf(stdout, "           decided: %s\n", d.Text)

		// The last step is saved as final whatever the interval; every other
		// step goes through Tick, which applies the interval (and rolling).
		saved := true
		if step == total {
			info, err = store.SaveFinal(ctx, step, sprint)
		} else {
			info, saved, err = store.Tick(ctx, step, sprint)
		}
		if err != nil {
			return err
		}
		if saved {
			fmt.Fprintf(stdout, "           saved %s\n", describe(info))
		} else {
			fmt.Fprintf(stdout, "           not saved (-every %d, -rolling=false)\n", *every)
		}

		if step == *stopAfter {
			return fmt.Errorf("%w after step %d (-stop-after %d); run again to resume", errCrash, step, *stopAfter)
		}
	}
	return writeResult(ctx, stdout, store, sprint, info)
}

// describe names a checkpoint for the output.
func describe(info checkpoint.Info) string {
	if info.Kind == checkpoint.KindRolling {
		return fmt.Sprintf("rolling checkpoint of step %d, %s", info.Step, info.Name())
	}
	return fmt.Sprintf("%s checkpoint of step %d, %s", info.Kind, info.Step, info.Name())
}

// redone says which finished steps a resume from info does again, assuming
// the stopped run used the same -every and -rolling as this one.
func redone(info checkpoint.Info, every int64, rolling bool) string {
	switch {
	case rolling || every == 1:
		return "no finished step is redone"
	case every > 1:
		return fmt.Sprintf("steps finished after step %d are redone (at most %d with -every %d)", info.Step, every-1, every)
	default:
		return fmt.Sprintf("steps finished after step %d are redone", info.Step)
	}
}

func writeResult(ctx context.Context, stdout io.Writer, store *checkpoint.Store[Sprint], sprint Sprint, final checkpoint.Info) error {
	res := NewResult(sprint, final)
	if err := store.WriteJSON(ctx, "result.json", res); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s done: %d/%d stories, %d points, %d decisions, %d run(s); wrote %s\n",
		res.Sprint, res.StoriesDone, res.StoriesTotal, res.Points, res.Decisions, res.Runs,
		filepath.Join(store.Location(), "result.json"))
	return nil
}

// Sprint is the orchestrator's whole state. Decisions and agent stats live
// in it, so a step redone after a resume records its decision once, not
// twice: the checkpoint from before the step does not hold it.
type Sprint struct {
	ID string `json:"id"`
	// Step is the number of steps finished; step k works story k.
	Step      int64                 `json:"step"`
	Stories   []Story               `json:"stories"`
	Decisions []Decision            `json:"decisions"`
	Agents    map[string]AgentStats `json:"agents"`
	// Runs counts the runs that worked on the sprint: 1 plus the resumes.
	Runs int `json:"runs"`
}

// Story is one backlog item.
type Story struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	Points int    `json:"points"`
	Status string `json:"status"` // "todo" or "done"
	Agent  string `json:"agent,omitempty"`
	Output string `json:"output,omitempty"`
}

// Decision is a choice an agent made while working a story.
type Decision struct {
	Step  int64  `json:"step"`
	Story string `json:"story"`
	Agent string `json:"agent"`
	Text  string `json:"text"`
}

// AgentStats is what one agent has done in the sprint.
type AgentStats struct {
	Stories int `json:"stories"`
	Tokens  int `json:"tokens"`
}

var agents = []string{"amara", "bashir", "chen"}

// backlog is the sprint's stories, each with the decision its agent makes.
var backlog = []struct {
	id, title string
	points    int
	decision  string
}{
	{"S-4.1", "Auto-checkpoint every turn", 5, "publish through a temp file and a link, never overwrite"},
	{"S-4.2", "Checkpoint browser", 3, "list from file names and headers only, never decode states"},
	{"S-4.3", "Campaign organisation", 3, "one directory per session, one writer lock per directory"},
	{"S-4.4", "Transcript export", 2, "write result files beside the checkpoints, replace atomically"},
	{"S-4.5", "Error recovery", 5, "save an error checkpoint beside the clean one, never instead"},
	{"S-4.6", "“While you were away…” summary", 2, "derive it from the checkpoint, store nothing extra"},
	{"S-4.7", "Retention", 3, "keep the last N step checkpoints, always keep final ones"},
}

// NewSprint returns the sprint before its first step.
func NewSprint(id string) Sprint {
	s := Sprint{ID: id, Decisions: []Decision{}, Agents: make(map[string]AgentStats)}
	for _, b := range backlog {
		s.Stories = append(s.Stories, Story{ID: b.id, Title: b.title, Points: b.points, Status: "todo"})
	}
	for _, a := range agents {
		s.Agents[a] = AgentStats{}
	}
	return s
}

// Done reports whether every story is done.
func (s *Sprint) Done() bool { return s.Step == int64(len(s.Stories)) }

// Work does step: the next free agent picks the next story, produces its
// output and records a decision. It is deterministic (a stand-in for model
// calls), so a redone step gives the same result.
func (s *Sprint) Work(step int64) {
	i := step - 1
	agent := agents[i%int64(len(agents))]
	story := &s.Stories[i]

	h := fnv.New32a()
	fmt.Fprintf(h, "%s/%s/%s", s.ID, story.ID, agent)
	n := int(h.Sum32())
	lines, tests := 80+n%400, 3+n%17
	tokens := 1000*story.Points + n%5000

	story.Status = "done"
	story.Agent = agent
	story.Output = fmt.Sprintf("%d lines changed, %d tests added, all green", lines, tests)
	s.Decisions = append(s.Decisions, Decision{Step: step, Story: story.ID, Agent: agent, Text: backlog[i].decision})
	st := s.Agents[agent]
	st.Stories++
	st.Tokens += tokens
	s.Agents[agent] = st
	s.Step = step
}

// Result is result.json: the sprint's outcome, for whoever runs next.
type Result struct {
	Sprint          string                `json:"sprint"`
	StoriesDone     int                   `json:"stories_done"`
	StoriesTotal    int                   `json:"stories_total"`
	Points          int                   `json:"points"`
	Decisions       int                   `json:"decisions"`
	Runs            int                   `json:"runs"`
	FinalStep       int64                 `json:"final_step"`
	FinalCheckpoint string                `json:"final_checkpoint"`
	Stories         []Story               `json:"stories"`
	Agents          map[string]AgentStats `json:"agents"`
}

// NewResult summarises a finished sprint whose last checkpoint is final.
func NewResult(s Sprint, final checkpoint.Info) Result {
	r := Result{
		Sprint:          s.ID,
		StoriesTotal:    len(s.Stories),
		Decisions:       len(s.Decisions),
		Runs:            s.Runs,
		FinalStep:       final.Step,
		FinalCheckpoint: final.Name(),
		Stories:         s.Stories,
		Agents:          s.Agents,
	}
	for _, st := range s.Stories {
		if st.Status == "done" {
			r.StoriesDone++
			r.Points += st.Points
		}
	}
	return r
}
