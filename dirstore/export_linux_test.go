package dirstore

// FdTempBuffer is the size of the buffer of the Linux writer's temporary
// file (see fdTemp), around which the kill tests pick state sizes.
const FdTempBuffer = fdTempBuffer
