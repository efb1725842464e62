package checkpoint

import (
	"context"
	"math"

	"github.com/gocheckpoint/checkpoint/internal/listing"
)

// newestNames reads the store's names for Latest and returns, of those
// that keep passes (all, if keep is nil), the checkpoint names of the
// highest step and every rolling name, with its step read from its header
// as names does (dropped: the rolling names where no regular file was
// there). The names of the highest step are found without a string or a
// parse of every name: a name whose digits say a lower step than one
// already found is passed over as bytes. A backend that can scan its
// names (listing.Scanner, the local directory on Linux) is not asked for
// a listing; any other's List is returned in objs, for a walk that needs
// every name.
//
// What Latest finds so is what names would have given it first: the
// names of the highest step that a listing holds, rolling file included.
func (s *Store[T]) newestNames(ctx context.Context, keep func(fileName) bool) (ns, dropped []named, objs []Object, err error) {
	top := int64(-1)
	var rolling []named
	consider := func(name string, listed Object) {
		fn, ok := s.cfg.layout.parse(name)
		if !ok || keep != nil && !keep(fn) {
			return
		}
		n := named{name: name, fn: fn, obj: listed}
		switch {
		case fn.kind == KindRolling:
			rolling = append(rolling, n)
		case fn.step > top:
			top, ns = fn.step, append(ns[:0], n)
		case fn.step == top:
			ns = append(ns, n)
		}
	}
	if sc, ok := s.b.(listing.Scanner); ok {
		err = sc.ScanNames(ctx, func(b []byte) {
			if bound, ok := stepBound(s.cfg.layout, b); ok && bound >= top {
				name := string(b)
				consider(name, Object{Name: name, Size: -1}) // as the directory lists it
			}
		})
	} else {
		objs, err = s.b.List(ctx)
		for _, o := range objs {
			if bound, ok := stepBound(s.cfg.layout, o.Name); ok && bound >= top {
				consider(o.Name, o)
			}
		}
	}
	if err != nil {
		return nil, nil, nil, err
	}
	for _, r := range rolling {
		n, ok := s.rollingNamed(ctx, r.obj, r.fn)
		if !ok {
			dropped = append(dropped, n)
			continue
		}
		ns = append(ns, n)
	}
	return ns, dropped, objs, nil
}

// stepBound returns, for a name that parse may accept as a checkpoint
// name of l, the highest step that parse may find in it: the step its
// digits after the prefix say, or math.MaxInt64 where no digits follow
// (the rolling file, whose step is in its header) or they are too many to
// be a step; false for a name that parse rejects. A name that parse
// accepts, but for the rolling file, has exactly the step its digits say.
func stepBound[S string | []byte](l layout, name S) (int64, bool) {
	p := len(l.prefix)
	if len(name) <= p || name[p] != '_' {
		return 0, false
	}
	for i := 0; i < p; i++ {
		if name[i] != l.prefix[i] {
			return 0, false
		}
	}
	var step int64
	i := p + 1
	for ; i < len(name) && '0' <= name[i] && name[i] <= '9'; i++ {
		if step > (math.MaxInt64-9)/10 {
			return math.MaxInt64, true // too many digits for a step: parse decides
		}
		step = step*10 + int64(name[i]-'0')
	}
	if i == p+1 {
		return math.MaxInt64, true
	}
	return step, true
}
