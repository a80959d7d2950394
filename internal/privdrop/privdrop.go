package privdrop

import (
	"errors"
	"fmt"
	"os/user"
	"strconv"
)

// ErrNotSupported is returned on systems other than Linux.
var ErrNotSupported = errors.New("privdrop: not supported on this system")

// Target is the user a process drops to: its user and group IDs and its
// supplementary groups.
type Target struct {
	Name     string
	UID, GID int
	Groups   []int
}

// Lookup finds the user name, or a numeric user ID, in the user database
// (/etc/passwd and /etc/group without cgo). A numeric ID that names no
// user is taken as it is, with a group of the same number and no
// supplementary groups, as setpriv(1) would take it.
func Lookup(name string) (Target, error) {
	u, err := user.Lookup(name)
	if err != nil {
		id, nerr := strconv.Atoi(name)
		if nerr != nil || id < 0 {
			return Target{}, fmt.Errorf("privdrop: user %q: %w", name, err)
		}
		if u, err = user.LookupId(name); err != nil {
			return Target{Name: name, UID: id, GID: id}, nil
		}
	}
	t := Target{Name: u.Username}
	if t.UID, err = strconv.Atoi(u.Uid); err != nil {
		return Target{}, fmt.Errorf("privdrop: user %q: uid %q: %w", name, u.Uid, err)
	}
	if t.GID, err = strconv.Atoi(u.Gid); err != nil {
		return Target{}, fmt.Errorf("privdrop: user %q: gid %q: %w", name, u.Gid, err)
	}
	gids, err := u.GroupIds()
	if err != nil {
		gids = []string{u.Gid} // no group database: the primary group alone
	}
	for _, g := range gids {
		if id, err := strconv.Atoi(g); err == nil {
			t.Groups = append(t.Groups, id)
		}
	}
	return t, nil
}

// String names the target as "name (uid U, gid G)".
func (t Target) String() string {
	return fmt.Sprintf("%s (uid %d, gid %d)", t.Name, t.UID, t.GID)
}

// Dropped says what Drop did beyond changing the IDs.
type Dropped struct {
	// Threads is the number of threads Check found with the target's
	// credentials and no capability.
	Threads int
	// BoundingSet and NoNewPrivs report that the capability bounding set
	// was emptied and no_new_privs set in every thread: not in a binary
	// linked with cgo.
	BoundingSet, NoNewPrivs bool
}
