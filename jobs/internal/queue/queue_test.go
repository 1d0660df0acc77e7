package queue

import "testing"

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
