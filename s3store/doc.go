// Package s3store keeps checkpoint stores in Amazon S3 or any
// S3-compatible object store: a checkpoint.Backend on a bucket and key
// prefix, for checkpoint.OpenBackend.
//
//	cfg, err := config.LoadDefaultConfig(ctx) // AWS_REGION, AWS_ENDPOINT_URL_S3, credentials...
//	client := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = o.BaseEndpoint != nil })
//	b, err := s3store.New(client, "my-bucket", "runs/42")
//	store, err := checkpoint.OpenBackend[State](b) // takes the lease
//	defer store.Close()                            // releases it
//
// Path-style addressing (endpoint/bucket/key) is for an S3-compatible
// server named by an endpoint (AWS_ENDPOINT_URL_S3: MinIO, versitygw),
// which usually has no DNS name per bucket; AWS S3 itself is addressed
// the SDK's default way, by virtual host (bucket.s3.region.amazonaws.com),
// and deprecates path style. The command-line tool does the same.
//
// A store's checkpoints are the objects directly under the prefix, named
// as in a local directory (runs/42/step_00000042.json); a child store
// (a session) is the prefix runs/42/NAME/. The module is separate from
// github.com/gocheckpoint/checkpoint, so the core module does not depend on
// the AWS SDK.
//
// # Guarantees, beside a local directory's
//
//   - A checkpoint is one PutObject with If-None-Match: * (no multipart
//     upload): it is visible whole or not at all, and never replaces an
//     object; of concurrent saves of one name, in any processes, exactly
//     one succeeds and the others get ErrExists (locally: link or
//     RENAME_NOREPLACE). The limit is MaxObjectSize, 5 GiB, the limit of one
//     PUT (larger is ErrInvalid, and nothing is sent).
//   - Memory does not depend on a checkpoint's size, either way. Before
//     its PUT, an object is spooled: in memory up to DefaultSpoolMemory
//     (4 MiB), beyond that in a temporary file in SpoolDir (os.TempDir by
//     default), whose body the PUT then sends, so that the SDK can sign
//     it, checksum it and send it again on a retry. The file has no name
//     from its creation on where the system allows it (not Windows: there
//     it is removed once the PUT has answered, and a killed process leaves
//     it behind, named .checkpoint-s3-spool-*); it is removed on every
//     path, and a write function that fails, a cancelled context, a
//     refused condition or a full spool disk publish nothing. A byte
//     payload (Store.SaveFrom, OpenPayload) of 1 GiB saves with 9 MB
//     allocated and loads with 0.2 MB, as one of 64 MiB does. The price is
//     that the payload is written to local disk before it is sent, and the
//     PUT starts once the write function has returned. A multipart upload
//     would stream without the disk, but its ETag is not the MD5 of the
//     bytes (which tells an attempt that landed on a retry, and finishes
//     an interrupted Rename), a killed writer leaves its parts billed
//     until a lifecycle rule aborts them, and its conditional
//     CompleteMultipartUpload is newer and less widely honoured than the
//     conditional PutObject every save already relies on.
//   - The rolling file and side files are replaced with If-Match on the
//     ETag the store last saw (If-None-Match: * where it saw none); a
//     mismatch is ErrConflict and changes nothing (locally the writer lock
//     alone keeps other writers out).
//   - A PUT that returned success is durable and visible to every reader:
//     there are no temporary files and no directory fsync. A kill -9 at
//     any instant leaves the object or nothing.
//   - Moving a damaged checkpoint aside (Rename) is a GetObject of it
//     (If-Match on its ETag), a PutObject of its bytes with
//     If-None-Match: *, and a DeleteObject: it never replaces an object,
//     one created meanwhile included (that is ErrExists), on any server
//     that honours the condition on PutObject, as saving requires. Not
//     CopyObject, whose destination conditions some servers ignore. The
//     bytes are spooled, as a save's are. Repeating it after a crash
//     between the PUT and the DELETE finishes it where the server's ETags
//     are the MD5 of the bytes (single-part uploads, no SSE-KMS); the
//     store itself does not repeat it: it moves the damage aside again,
//     to the next free .corrupt name.
//   - A read is one GET, streamed: the object as it was when opened, even
//     if it is replaced or removed meanwhile (as an open file), never a
//     mix. The store's read limits apply as locally.
//   - One writer per store, by a lease instead of flock (below). ReadOnly
//     takes no lease.
//   - Errors name the object as s3://bucket/key (Locate) where local
//     errors name the path, and wrap the same sentinels: ErrExists,
//     ErrConflict, ErrLocked, ErrInvalid, and fs.ErrNotExist for a missing
//     object; a lease object that is not one (not JSON, no generation,
//     larger than a lease can be) is ErrCorrupt, for writers and readers
//     alike, and is never taken for no lease. Throttling and 5xx answers
//     are retried by the SDK (its retryer, configured on the client), and
//     every call is bounded by its ctx; a request left unanswered past the
//     retries (a network error, an attempt's timeout, a 5xx, a GET's body
//     cut short) wraps ErrUnavailable, which stops Store.Latest rather
//     than let it resume from the step before. A server that does not
//     honour the conditions is ErrUnsupported (see What the server must
//     provide). A conditional PUT retried after its
//     first attempt landed (its answer lost) is recognised as the writer's
//     own, rather than taken for another writer's: every PUT carries a
//     token random per write (x-amz-meta-checkpoint-write), and an object
//     with this write's token, generation and bytes is its own; any other
//     object is not, identical bytes of the same writer included. Where
//     the HEAD that would tell fails, the write returns an error that is
//     neither success nor ErrExists (ErrUnavailable, where the HEAD got no
//     answer). A PUT whose ctx ends
//     mid-upload leaves nothing; one whose ctx ends after the server took
//     it but before its answer has saved although it returned the ctx's
//     error (a save of that step again is then ErrExists), as a local save
//     interrupted after its rename has.
//
// # The lease
//
// The writer holds the object PREFIX/.checkpoint.lease, a JSON document
// (generation, holder host/pid/id, TTL, sealed set). Lock creates it with
// If-None-Match: *, and the holder renews it with If-Match on its ETag
// every third of the TTL (LeaseTTL, default 30 s). A second writer gets
// ErrLocked, naming the holder, while the lease lives, and takes it over
// once it has expired; a released lease (Store.Close) is taken over at
// once. Releasing is a conditional PUT that marks the lease released, not
// a DELETE (some S3-compatible servers ignore conditions on DELETE).
//
// Expiry is judged without trusting any other machine's clock. A contender
// takes a lease over only when it has seen the same ETag for a full TTL by
// its own monotonic clock, and then with If-Match on that ETag, so a renewal
// in between defeats it. The TTL is the one the holder wrote in the lease
// (its LeaseTTL; DefaultLeaseTTL for a lease without one), not the
// contender's own. Lock returns ErrLocked at once when the server's own clock
// (its Date header minus the lease's Last-Modified, whole seconds) says the
// lease was renewed less than a TTL minus one second ago; otherwise it
// watches the lease for up to one TTL, bounded by its ctx, and returns
// ErrLocked as soon as it sees a renewal. So a dead writer's store is taken
// over one to two TTLs after it died: retry OpenBackend while it returns
// ErrLocked, and expect it to block for up to one TTL when the lease looks
// expired. The holder trusts its lease until the start of its last successful
// renewal plus nine tenths of the TTL, by its own monotonic clock and by its
// wall clock alike (the monotonic clock stops while a machine is suspended;
// the wall clock is moved on at resume); a write that finishes after that, or
// after a renewal found the lease taken over, fails with ErrLocked.
//
// # Fencing
//
// A writer paused past its lease (a GC pause, SIGSTOP, a partition) that
// wakes up cannot make anything it writes after the takeover visible in
// List, Open, Latest or Load, in any process. Each holder has a
// generation, a number the takeover increments, and stamps it in every
// object it writes (x-amz-meta-checkpoint-generation), and each renewal
// lists what it wrote in the lease (the written set: names and ETags). The
// takeover lists the store before its PUT of the lease and records in the
// lease the sealed set: the name and ETag of every object then visible.
// Every reader applies one rule, judged by the lease it reads after the
// objects: an object is visible if it has no generation (not written by a
// lease holder), has the lease's generation, or is in the sealed set. A late
// write of an older generation is in neither, so it is hidden: listed by
// nobody, fs.ErrNotExist to Open and Stat (never damage, so never moved
// aside), and a Create of its name by the new holder replaces it. A save
// the old writer acknowledged is never hidden: it finished before its
// deadline, so before the new holder's listing. The full argument is
// beside the fencing code, in this package's source.
//
// What fencing does not cover: a stale writer's DELETE that was delayed in
// the network past its checks can still remove an object (a store deletes
// only checkpoints older than ones it keeps); a stale conditional Replace
// that lands before the new holder has replaced that object hides the
// object (the rolling file or a side file; numbered checkpoints, never
// replaced, are not affected); and deleting the lease object by hand while
// a writer may still be running restarts the generations at 1. Deleting it
// also makes visible again every object the fencing hid (a stale writer's
// late saves that no later holder overwrote): the next Lock seals all it
// lists, having no lease to judge them by.
//
// # Costs
//
// Counted on versitygw; a reader is a Backend that does not hold the lease
// (ReadOnly).
//
//   - Create, Replace: one PUT. Store.Save: that PUT alone (the writer
//     trusts its listing), plus its retention's DELETE when it prunes.
//     Opening a writable store: Lock (below), and no more: the store's
//     listing is answered from the one Lock made.
//   - Open: one GET (closing it with more than 64 KiB unread, as a header
//     read of a large checkpoint does, drops its connection: see Open); a
//     reader also reads the lease: one conditional GET, a 304 when it did
//     not change.
//   - List of N objects: one LIST per 1,000 (the server's page); a reader
//     adds the conditional GET of the lease and a HEAD (eight at a time,
//     then cached by name and ETag) for each object that is neither sealed
//     nor in the written set: what the writer wrote since its last renewal.
//   - Store.Latest on the writer: one LIST and one GET; no LIST while
//     the writer has written nothing since it took the lease, nor renewed
//     it (Lock's listing answers), so a writer that resumes (OpenBackend,
//     then Latest) lists the store once.
//   - Moving a damaged checkpoint aside (Rename): a HEAD of it and of the
//     destination, a GET and a PUT of its bytes, a DELETE.
//   - The lease: one PUT per third of the TTL (0.1 a second by default).
//     Lock: a GET, a LIST of the store and a HEAD per object the previous
//     holder wrote since its last renewal, then a PUT. The first Lock of a
//     Backend (and of the children Sub derives from it) checks the server
//     first: four PUTs and a DELETE of a scratch object, plus a HEAD and a
//     PUT on a server that takes If-Match bare (below). The lease lists every
//     object of the store (sealed or written), about 80 bytes each, and
//     every renewal rewrites it: 10,000 checkpoints make a lease of about
//     800 KB, rewritten every 10 s by default. A lease is read up to 256 MiB
//     (larger is ErrCorrupt), so a store is limited to about three million
//     objects; keep it far below with a retention rule.
//
// # What the server must provide
//
// Strong read-after-write consistency for PUT, GET, HEAD and LIST (a
// successful PUT is seen by every later request, in listings too); PutObject
// with If-None-Match: * and If-Match, answering 412 (or 404 for If-Match
// on a missing key) when the condition fails, atomically with respect to
// other conditional PUTs; GET with If-None-Match (304);
// ListObjectsV2 with delimiter and continuation token; user metadata kept
// and returned by HEAD and GET; GET with If-Match; DeleteObjects; and an
// ETag that differs for different bytes (the MD5 of a single-part upload).
// AWS S3 provides all of these (conditional writes since 2024).
//
// The conditional PUTs are what keep two writers apart, so they are
// checked rather than trusted. Before its first lease, Lock (and so
// checkpoint.OpenBackend) creates a scratch object under the prefix
// (.checkpoint.probe-RANDOM, which List leaves out) with If-None-Match: *,
// makes sure a second create of it is refused, replaces it with If-Match
// on its ETag, makes sure a replacement with If-Match on another ETag is
// refused, and removes it. A server that fails any of these is refused:
// Lock returns an error wrapping ErrUnsupported (not ErrLocked) that names
// the condition it ignored, the server's endpoint and the bucket, and
// writes nothing else; the result is kept, so every later Lock of that
// Backend returns it at once. A probe that failed otherwise (a network
// error, ctx) is tried again at the next Lock. The check is made once per
// Backend and the children Sub derives from it, at Lock rather than in New,
// because New takes no context and sends no request, and only a writer
// writes: a ReadOnly store, which never locks, sends no write and is not
// checked (it sends no condition that could be ignored; what it reads is
// as safe as the writer that wrote it, which was checked). A Backend used
// without Lock (its writes unfenced) is not checked either.
//
// The form of If-Match: S3 documents, and RFC 9110 requires, the quoted
// ETag ("abc..."), which this package sends; Ceph RGW (16.2.15) refuses
// it on PutObject with 412 PreconditionFailed whatever the object (it
// compares the header with the bare hexadecimal ETag it stores) and takes
// it bare, while versitygw takes only the quoted form. So a PutObject whose
// If-Match is refused with a 412 is followed by a HeadObject of the key:
// if the object has the very ETag the condition named, the server did not
// understand the form, and the PUT is sent again with the other form, which
// the Backend then keeps sending. A real refusal (another writer's ETag, or
// no object) is returned as it came: the second form is never tried, so it
// cannot turn one into a success. A server that refuses the object's own
// ETag in both forms is ErrUnsupported.
//
// A lease renewal the server refuses is told apart by the lease object read
// after it: only a newer generation is "taken over by another writer"; a
// lease object that still has this writer's generation and the ETag the
// renewal named (the server refused a condition that held) is
// ErrUnsupported, and a deleted or rewritten lease object, and any other
// answer (a 400, a 403, a 5xx past the SDK's retries), are reported with
// the status, the error code and the lease's key, in the ErrLocked error of
// the writes refused once the lease's deadline has passed.
//
// Checked, by this package's tests and the conformance suite
// checkpoint/backendtest (.ci/s3-test runs them):
//
//   - versitygw v1.8.0 (posix backend). It ignores the destination's
//     If-None-Match and If-Match on CopyObject, which is why Rename does
//     not use CopyObject; it answers If-Match on a missing key with 404
//     rather than 412, which is handled; it refuses a bare ETag in
//     If-Match; and it answers a conditional PUT it refuses before reading
//     its body and resets the connection, so a client sending a large
//     body sees a network error rather than the 412: a HEAD then tells the
//     refusal (ErrExists, ErrConflict) from a network failure (an error
//     wrapping no sentinel).
//   - Ceph RGW 16.2.15 (Debian's radosgw, one monitor, one in-memory OSD:
//     .ci/s3-server-ceph). It takes If-Match on PutObject bare only (see
//     above: learned at the first Lock); GET takes either form. It ignores
//     If-Match on DeleteObject, which the store does not rely on.
//   - MinIO (module version v0.0.0-20260212201848-7aac2a2c5b7c) and
//     SeaweedFS (v0.0.0-20261109003541-7506e5f91cd6), built and started by
//     .ci/s3-server. MinIO also ignores the conditions on CopyObject, and
//     If-Match on DeleteObject, neither of which the store relies on.
//     SeaweedFS honours both; the first write in a new bucket takes it
//     about 0.2 s (3 s for its first bucket), against a few ms after.
//   - s3rver 3.7.1 (npm) ignores If-None-Match and If-Match on PutObject:
//     refused at Lock (.ci/s3-nonconforming).
//
// AWS S3 itself, R2 and GCS's XML API were not checked here.
package s3store
