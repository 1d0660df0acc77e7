package queue

import (
	"slices"
	"testing"
)

func TestRoom(t *testing.T) {
	for _, c := range RoomCases {
		if got := c.Limit.Capped(); got != c.Capped {
			t.Errorf("%s: Capped() = %v, want %v", c.Name, got, c.Capped)
		}
		if got := c.Limit.Room(c.Running); got != c.Room {
			t.Errorf("%s: Room(%d) = %d, want %d", c.Name, c.Running, got, c.Room)
		}
	}
}

func TestTags(t *testing.T) {
	for _, c := range TagCases {
		tags, last := Tags(c.Inputs(), c.N)
		if !slices.Equal(tags, c.Tags) || last != c.WantLast {
			t.Errorf("%s: Tags(%+v, %d) = %v, %v; want %v, %v", c.Name, c.Inputs(), c.N, tags, last, c.Tags, c.WantLast)
		}
	}
	if tags, last := Tags(TagInputs{Last: 7}, 0); len(tags) != 0 || last != 7 {
		t.Errorf("no jobs: %v, %v; want none, 7", tags, last)
	}
}
