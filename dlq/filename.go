package dlq

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

const (
	itemExt = ".json"
	// maxNameBytes is the usual file-name limit (ext4, APFS, NTFS).
	maxNameBytes = 255
	// hashedPrefixBytes is how much of the escaped id a hashed name keeps.
	hashedPrefixBytes = 160
	upperHex          = "0123456789ABCDEF"
)

func safeByte(c byte, first bool) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
		return true
	case c == '.':
		return !first
	}
	return false
}

func escapeID(id string) string {
	var b strings.Builder
	b.Grow(len(id))
	for i := 0; i < len(id); i++ {
		c := id[i]
		if safeByte(c, i == 0) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(upperHex[c>>4])
		b.WriteByte(upperHex[c&15])
	}
	return b.String()
}

// ItemFileName returns the file name (with ".json") that stores itemID.
// Bytes in [A-Za-z0-9_-], and '.' except as the first byte, are kept; every
// other byte is written as %XX (upper-case hex), so "item-123" is stored as
// "item-123.json" and no id can name a path outside items/ ("../x" →
// "%2E.%2Fx.json"). The mapping is injective; ItemIDFromFileName reverses
// it. When the escaped name would exceed 255 bytes, the name is the first
// 160 bytes of the escaped id, '~', and 32 hex digits of the id's SHA-256:
// '~' never appears in an escaped id, so such names cannot collide with
// plain ones, and the full id is read from the file's item_id.
//
// On case-insensitive file systems ids that differ only in case share a
// file; the store detects it (ErrNameCollision) instead of mixing records.
func ItemFileName(itemID string) string {
	esc := escapeID(itemID)
	if len(esc)+len(itemExt) <= maxNameBytes {
		return esc + itemExt
	}
	cut := hashedPrefixBytes
	// Never split a %XX escape.
	if i := strings.LastIndexByte(esc[:cut], '%'); i >= 0 && i > cut-3 {
		cut = i
	}
	sum := sha256.Sum256([]byte(itemID))
	return esc[:cut] + "~" + hex.EncodeToString(sum[:16]) + itemExt
}

// ItemIDFromFileName reverses ItemFileName. It returns false for names that
// are not plain item files: hashed names (the id must be read from the file),
// temporary files (leading '.'), other extensions and malformed escapes.
func ItemIDFromFileName(name string) (string, bool) {
	if !strings.HasSuffix(name, itemExt) || strings.HasPrefix(name, ".") {
		return "", false
	}
	esc := strings.TrimSuffix(name, itemExt)
	if strings.IndexByte(esc, '~') >= 0 {
		return "", false
	}
	var b strings.Builder
	b.Grow(len(esc))
	for i := 0; i < len(esc); i++ {
		c := esc[i]
		if c != '%' {
			if !safeByte(c, i == 0) {
				return "", false
			}
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(esc) {
			return "", false
		}
		hi, lo := unhex(esc[i+1]), unhex(esc[i+2])
		if hi < 0 || lo < 0 {
			return "", false
		}
		b.WriteByte(byte(hi<<4 | lo))
		i += 2
	}
	id := b.String()
	if escapeID(id) != esc { // non-canonical spelling, e.g. "%61" for "a"
		return "", false
	}
	return id, true
}

// isHashedName reports whether name is a hashed item file name.
func isHashedName(name string) bool {
	return strings.HasSuffix(name, itemExt) && !strings.HasPrefix(name, ".") && strings.IndexByte(name, '~') >= 0
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'A' && c <= 'F':
		return int(c - 'A' + 10)
	}
	return -1
}
