package traffic

// sysSetns is setns(2) on linux/arm64 (the syscall package does not name it).
const sysSetns = 268
