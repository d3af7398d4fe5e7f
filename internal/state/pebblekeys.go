package state

import (
	"bytes"
	"encoding/binary"
	"fmt"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

// checkName: the key encoding keeps the name's length in 15 bits.
func checkName(name string) {
	if len(name) > maxNameLen {
		panic(fmt.Sprintf("state: state name of %d bytes; at most %d", len(name), maxNameLen))
	}
}

const (
	maxNameLen = 1<<15 - 1
	mapFlag    = 1 << 15 // in the name length: a map-state key
)

func encodeKey(dst []byte, kg int, name string, key []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst[:0], uint16(kg))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(name)))
	dst = append(dst, name...)
	return append(dst, key...)
}

// encodeMapName is the start of every entry of the named map state in key
// group kg, of every record key.
func encodeMapName(dst []byte, kg int, name string) []byte {
	dst = binary.BigEndian.AppendUint16(dst[:0], uint16(kg))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(name))|mapFlag)
	return append(dst, name...)
}

// encodeMapPrefix is the start of every entry of key's map.
func encodeMapPrefix(dst []byte, kg int, name string, key []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst[:0], uint16(kg))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(name))|mapFlag)
	dst = append(dst, name...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(key)))
	return append(dst, key...)
}

func encodeMapKey(dst []byte, kg int, name string, key, userKey []byte) []byte {
	return append(encodeMapPrefix(dst, kg, name, key), userKey...)
}

// encodeEntry is the store key of e.
func encodeEntry(dst []byte, kg int, e entry) []byte {
	if e.kind == weirv1.KeyedStateEntry_KIND_MAP {
		return encodeMapKey(dst, kg, e.state, e.key, e.userKey)
	}
	return encodeKey(dst, kg, e.state, e.key)
}

// prefixEnd is the smallest key greater than every key starting with
// prefix; a key-group prefix never is all 0xff.
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// decodeKey splits a store key; e's slices alias k.
func decodeKey(k []byte) (kg int, e entry, ok bool) {
	if len(k) < 4 {
		return 0, entry{}, false
	}
	n := int(binary.BigEndian.Uint16(k[2:4]))
	isMap := n&mapFlag != 0
	n &^= mapFlag
	if len(k) < 4+n {
		return 0, entry{}, false
	}
	if bytes.HasPrefix(k[4:4+n], []byte(ttlIndexPrefix)) {
		// The TTL states' expiry index: derived, not state.
		return 0, entry{}, false
	}
	kg, e.state, k = int(binary.BigEndian.Uint16(k[:2])), string(k[4:4+n]), k[4+n:]
	if !isMap {
		e.key = k
		return kg, e, true
	}
	if len(k) < 4 {
		return 0, entry{}, false
	}
	kl := int(binary.BigEndian.Uint32(k[:4]))
	if len(k) < 4+kl {
		return 0, entry{}, false
	}
	e.kind, e.key, e.userKey = weirv1.KeyedStateEntry_KIND_MAP, k[4:4+kl], k[4+kl:]
	return kg, e, true
}
