package gitops

import (
	"io/fs"
	"syscall"
)

// deletesInProcess: on Linux the clean deletes what it found itself (see
// cleanskip.go; elsewhere, where file systems commonly fold case or
// normalise names, git deletes it).
const deletesInProcess = true

// dirStampOf is a directory's stamp (see cleanskip.go) from its lstat.
func dirStampOf(fi fs.FileInfo) (dirStamp, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return dirStamp{}, false
	}
	return dirStamp{ino: st.Ino, sec: st.Ctim.Sec, nsec: st.Ctim.Nsec}, true
}

// stampsKept reports whether dir is on a local file system known to set a
// directory's change time on every change of its entries: ext2/3/4, XFS,
// Btrfs or tmpfs (not overlayfs, network or FUSE file systems).
func stampsKept(dir string) bool {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return false
	}
	switch uint32(st.Type) {
	case 0xef53, // ext2, ext3, ext4
		0x58465342, // XFS
		0x9123683e, // Btrfs
		0x01021994: // tmpfs
		return true
	}
	return false
}
