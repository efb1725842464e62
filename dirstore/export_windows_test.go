package dirstore

// InUseWait is how long a removal or a replacement retries while another
// program holds the file (see retryInUse).
const InUseWait = inUseWait
