// Command checkpoint inspects and maintains the checkpoint directories of
// github.com/gocheckpoint/checkpoint without writing Go: list the
// checkpoints, print one, verify every file, compare two steps, copy a
// store elsewhere, apply retention rules and clean up leftovers.
//
//	go install github.com/gocheckpoint/checkpoint/cmd/checkpoint@latest
//
// Usage:
//
//	checkpoint ls DIR [--json] [--bytes]
//	checkpoint show DIR STEP|latest [--state | --payload] [--kind KIND | --file NAME]
//	checkpoint verify DIR [--json] [-v]
//	checkpoint diff DIR A B
//	checkpoint cp SRC DST [--json] [-q] [-j N] [--wait DURATION]
//	checkpoint prune DIR --keep-last N [--keep-every K] [--keep-within D] [--keep-one-per D] [--prune-kinds final,error] [--dry-run] [--bytes]
//	checkpoint gc DIR [--dry-run]
//	checkpoint sessions ls ROOT [--json]
//	checkpoint sessions rm ROOT ID... [--dry-run]
//	checkpoint sessions prune ROOT --idle DURATION [--dry-run]
//	checkpoint serve [--addr HOST:PORT] [--write] DIR
//	checkpoint keygen [-o FILE]
//	checkpoint rekey --to FILE [--plaintext] [--wait DURATION] DIR
//	checkpoint help [COMMAND]
//
// Every command but keygen also takes --identity FILE (see Encrypted stores).
//
// For stores in S3 or S3-compatible object storage, install the build with
// S3 support instead, github.com/gocheckpoint/checkpoint/s3store/cmd/checkpoint
// (the same tool; this one keeps its module free of the AWS SDK): there
// DIR may also be s3://BUCKET/PREFIX, configured by the standard AWS
// environment (AWS_ENDPOINT_URL_S3, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_REGION). Given an s3:// location, this one says so (exit code 2).
//
// DIR is a store's directory, or a root of sessions (a directory whose
// subdirectories hold session.json files, as made by checkpoint.OpenSessions):
// ls lists its sessions, verify and gc work on every session, and show, diff
// and prune want one session's directory. ls shows each session's ID as
// given to the library, quoted where it holds a space, a quote, '=', '\'
// or a character that is not printable; an ID that is not a plain name
// ("user:42/thread#7") lives in a directory of a mapped name, which
// ls --json gives as "dir" (see checkpoint.ValidSessionID). Flags may
// come before or after the arguments, with one dash or two; "--" ends the
// flags.
//
// Everything printed that comes from disk (names, error records, states,
// session metadata) has its control characters escaped: \x1b, \u009b in
// text, \u001b in JSON (the same JSON value), so that a hostile file cannot
// drive the terminal.
//
// # Commands
//
// ls prints a table of the checkpoints (step, kind, save time in UTC with
// its age, size, compression, file, meta), ascending by step, reading
// headers only; or of the sessions, the most recently active first. Sizes
// are for a person (4.2 KiB); --bytes prints them exactly. --json prints the
// same as a JSON array, with sizes in bytes and times in full. In a
// directory with no checkpoint, ls names the directories below it, up to
// three levels down, that hold checkpoints or sessions (it follows no
// symbolic link and reads a bounded number of entries).
//
// show prints a checkpoint's header (file, format, step, kind, time, size,
// compression, checksum, meta, error record) and its state as indented JSON,
// decompressed; --state prints the state alone, for jq. STEP is a step number
// or "latest", the newest checkpoint that loads (what a program resuming from
// the directory would get). A step with several files (a step checkpoint and
// a final or error one, the rolling file) shows the one saved last, as Load
// does; --kind step|final|error|rolling picks the newest of that kind, and
// --file NAME one file by its name (then STEP may be left out). A step with
// no checkpoint (pruned, or not due) names the nearest kept steps below and
// above it. A checkpoint of a byte payload (Store.SaveFrom) shows its header
// and the payload's size once it has read the payload to its end and
// verified it; --payload writes the payload itself to stdout, as it is, once
// verified, and nothing else (a JSON state with --payload is an error).
// ls marks a byte payload "(byte payload)"; ls --json says "payload".
//
// verify reads every checkpoint in full and checks its checksum, format
// version, header and state, and prints each bad file with the reason (-v
// prints the good ones too) and a summary. Temporary files and quarantined
// checkpoints are reported as notes, not failures. On a root of sessions,
// each session's session.json is checked too. --json prints a report. A
// directory with no checkpoint (or a root with no session) fails with exit
// code 3, naming the subdirectories that hold checkpoints: nothing checked
// proves nothing.
//
// diff compares the states of two steps (numbers or "latest") and prints one
// line per difference with its path, in jq syntax:
//
//	~ .characters.brynja.hp: 12 -> 9
//	+ .inventory[3]: "rope"
//	- .whispers: ["the bells ring for someone still alive"]
//
// Two equal states print one line that says so. Array elements are matched
// by an edit script, so an element inserted in the middle is one addition;
// for states too big for one, or whose arrays nest too deep (its cost grows
// exponentially with that depth), arrays are compared index by index
// instead, and a note on stderr says so.
//
// cp copies the store, or the root of sessions with every session, at SRC
// to DST (checkpoint.Copy): a directory to another, or, in the build with
// S3 support, a directory to a bucket, a bucket to a directory, a bucket to
// another. Every checkpoint is read in full and verified as it is copied,
// and copied byte for byte as it is stored (compressed, encrypted); one
// that does not verify is reported ("SKIPPED (damaged)", "SKIPPED
// (no_key)" for an encrypted store copied without --identity) and not
// copied, and the exit code is then 1. Side files and each session's
// session.json are copied too; the header index, lock files and temporary
// files are not. Nothing at DST is ever replaced: a file DST already holds
// with the same bytes counts as copied, one with other bytes is named on
// stderr and left as it is (exit code 3). Each file appears at DST whole,
// and each session of a root appears whole, once all its files are
// there; a kill at any instant leaves nothing half-visible, and running
// the same cp again completes the copy. cp takes DST's writer lock (each
// session's, for a root): a program writing DST makes it stop (exit code
// 4), or wait with --wait DURATION; in a root, the sessions a writer holds
// are left (exit code 4, as gc) and the others copied. -j N copies up to N files at once
// (default 8). It prints what it skipped and a summary: files copied and
// their size, files already there, sessions whole, skipped, failed;
// --json prints a report.
//
// Long runs show their progress on stderr: on a terminal, verify, gc,
// prune and cp draw a bar redrawn in place (at most ten times a second)
// and erased at the end; where stderr is not a terminal, cp prints a line
// each time another tenth of a copy of 100 files or more is done, and the
// others print nothing. -q (cp) shows no progress.
//
// prune applies retention rules, as the library's KeepLast, KeepMultiplesOf,
// KeepWithin, KeepOnePer and PruneKinds options do, and prints what it
// removed. At least one --keep rule is required. Durations are Go durations
// (90m, 36h) or whole days (7d). --dry-run prints what would be removed and
// removes nothing.
//
// gc removes temporary files of interrupted saves, quarantined damaged
// checkpoints (name.corrupt, name.corrupt-N) and error checkpoints that a
// clean checkpoint saved after them superseded (which the store removes
// anyway at a writer's next save or Close: gc says so); on a root of
// sessions, it also removes sessions left half-made by a crash, and cleans
// every session; a session whose writer is running is skipped (exit code 4)
// and the others are cleaned all the same. --dry-run lists what would go and
// removes nothing; beside a running writer it calls a temporary file that
// writer's save in progress (where the system tells who holds the lock:
// Linux). With no writer in sight it says an interrupted save left the file,
// unless a writer the system cannot show holds the lock: Linux's /proc/locks
// leaves out writers in other containers (PID namespaces) and on other hosts.
//
// sessions works on a root of sessions (ROOT, a directory or, in the build
// with S3 support, an s3:// location). sessions ls prints each session's
// ID, checkpoints, last step, last activity (its last checkpoint, or its
// creation or metadata change if later) and a note: pinned, or damaged.
// sessions rm removes the named sessions with all their checkpoints
// (checkpoint.Sessions.Delete), going on past the ones it cannot remove; a
// session whose writer is running is left whole (exit code 4). sessions
// prune --idle DURATION removes every session inactive for longer
// (Sessions.PruneIdle), except pinned ones (a non-empty session meta
// checkpoint.pin), damaged ones, which cannot be dated (sessions rm removes
// them), and those a writer is running. With --dry-run both print what
// would go and remove nothing.
//
// serve starts a local web server for a store or a root of sessions and
// prints the address of its page on stdout, one line
// "checkpoint serve: http://127.0.0.1:PORT/?token=TOKEN"; open it in a
// browser. It serves until interrupted (Ctrl-C). The page shows the
// sessions (sortable, damaged ones marked), a run's timeline (a chart of
// every checkpoint by step: size, time between saves, kind, damaged files,
// and which checkpoints the retention rules typed into the page would
// prune), one checkpoint (its header, metadata, metrics, error record and
// state, a tree opened a node at a time, so that a state of hundreds of
// megabytes opens without loading it into the page, with search by key or
// value and each node's path), the diff of two checkpoints of one session
// or two, and, with --write, forks a session from any step (the root's
// claim is taken for the fork only). Views update while a program keeps
// saving. Without --write the server never writes; it opens every store
// ReadOnly and works beside a running writer. It reads through the same
// layer as show, diff and ls: a damaged file, a missing step or an
// unreachable store is an error on the page naming the file and reason.
//
// The server listens on 127.0.0.1 and a free port unless --addr says
// otherwise (an address that is not loopback is noted on stderr: the
// token is then what keeps others out). Every request must carry the
// random token of the printed URL (the page keeps it in a cookie scoped
// to the port): without it the answer is 403 and nothing read. A request
// must name the server by localhost, an IP address (a loopback one unless
// the server listens beyond loopback) or the host name given to --addr;
// one naming another host (DNS rebinding) is refused. No response
// allows cross-origin reads, a fork is a POST that needs the page's CSRF
// token from its own origin, and the page renders everything read from
// disk as text (its Content-Security-Policy runs no script but its own).
// The page is embedded in the binary: it needs no network and no build.
//
// keygen makes an age X25519 identity, the key of an encrypted store
// (checkpoint.Encrypt), and writes its identity file as age-keygen does
// (comments, then one AGE-SECRET-KEY-1... line, which age.ParseIdentities
// and the age tools read) to FILE, created with mode 0600, with -o FILE (an
// existing FILE is an error: it is never overwritten), or else to stdout. It
// prints the public key (age1...) and the key ID (checkpoint.KeyID, the name
// encrypted files and errors give the key) to stderr as comments ("# public
// key: age1..."); it never prints the secret key.
//
// rekey re-encrypts a store, or a root of sessions and every session in it,
// to the first identity of the identity file --to FILE
// (checkpoint.Reencrypt): each file encrypted to another key, which one of
// the --identity identities must open, is rewritten to the new key in one
// atomic replacement, under the store's writer lock; with --plaintext, the
// store's plaintext files are encrypted too (the migration of a plaintext
// store). It prints each file it rewrites as it goes ("rewrote PATH (N so
// far)") and a summary (rewritten, already current, failed); each file it
// could not rewrite (damaged, of a key no identity opens, plaintext without
// --plaintext) is left as it was and named on stderr, and the exit code is
// then 3. A kill at any instant leaves every file whole, of the old key or
// the new one, and a second run finishes the work (a run with nothing left
// to do rewrites nothing). --wait DURATION waits that long for a store's
// writer lock instead of refusing at once (exit code 4). Once it succeeds,
// the old identities may be dropped.
//
// # Encrypted stores
//
// A store written with checkpoint.Encrypt is read with its key's identity:
// --identity FILE, an age identity file (X25519 identities only), given to
// any command before its name or among its flags, and repeatable; without
// the flag, the files listed in the environment variable CHECKPOINT_IDENTITY
// (separated by the system's list separator, ':' or ';' on Windows). Every
// identity of every file is read; the first identity of the first file is
// the current key, which what a command writes (prune, gc, sessions rm and
// prune, a store's header index or a session's metadata) is encrypted to.
// With identities, every store and root a command opens, local or remote,
// is opened encrypted, and reads only files that authenticate.
//
// Without an identity that opens it, an encrypted file is not damage, and
// the commands say what to pass: show, diff and latest fail (exit code 3)
// naming the key ID the file is encrypted to and telling to pass
// --identity FILE or set CHECKPOINT_IDENTITY (or, with identities, that none
// of those given opens it); ls lists such a checkpoint "(encrypted to a key
// no identity given opens)" with a note on stderr; prune never removes it.
// With identities, a plaintext file is not read either (rekey --plaintext
// encrypts it). verify reports each file on its own line: BAD for a damaged
// one (an encrypted file that fails authentication: a flipped byte, a
// truncation, a file copied to another step's name), NO KEY for one no
// identity opens (naming its key), PLAINTEXT for a plaintext file read with
// identities; each counts as bad (exit code 1); --json gives each file's
// "problem": damaged, no_key, plaintext or error. An identity file that
// cannot be read is an error naming it (exit code 3); one that holds no
// X25519 identity, or another kind of key, a usage error (exit code 2).
//
// # Layouts
//
// A store recognises only the file names of its layout (WithLayout). The
// command infers the layout from the names in DIR (checkpoint.DetectLayouts).
// When DIR holds files of more than one layout it uses the one with the most
// files and says so on stderr; when two layouts tie it stops with a usage
// error. --layout PREFIX/DIGITS (turn/3), or --layout PREFIX with the digits
// inferred, overrides it. A directory with no checkpoint file has the
// default layout, step/8; prune and gc leave such a directory alone (they
// create no lock file in it) unless --layout is given.
//
// # Safety beside a running program
//
// ls, show, verify, diff and the --dry-run forms open the store ReadOnly: they
// take no lock and write nothing, so they can run beside the program that
// writes the store. prune, gc, rekey and sessions rm take the store's writer lock; if a program
// holds it they stop with exit code 4 and change nothing (sessions prune
// skips such a session). cp reads SRC the same way, beside its writer, and
// takes the writer lock of DST.
//
// # Exit codes
//
//	0  success; verify: every checkpoint is good; diff: the states are equal
//	1  verify: at least one bad checkpoint; diff: the states differ; cp: a
//	   checkpoint that does not verify was skipped
//	2  usage: a bad command, flag or argument (the usage is printed)
//	3  the operation failed: a missing directory or step, a checkpoint that
//	   does not load (one no identity opens among them), an I/O error, an
//	   identity file that cannot be read; verify: no checkpoint to verify;
//	   rekey: a file it could not rewrite; cp: a file it could not copy
//	4  a writer holds the store's lock (prune, gc, rekey, sessions rm, cp's
//	   DST), or another process is
//	   creating a session in the root of sessions (gc)
//
// Errors go to stderr, naming the file or directory and the reason.
package main

import (
	"os"

	"github.com/gocheckpoint/checkpoint/internal/cli"
)

func main() {
	os.Exit(cli.Run(os.Args[1:], os.Stdout, os.Stderr, cli.Remote{
		Scheme:  "s3",
		Missing: "go install github.com/gocheckpoint/checkpoint/s3store/cmd/checkpoint@latest",
	}))
}
