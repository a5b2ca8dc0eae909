package northd

// Snapshot returns every row of db that the State holds, as inserts: what
// a new State needs to start from this one's view of that database. The
// daemon builds a new State so when the other database's schema changes
// (its rows no longer fit the old schema's columns).
func (s *State) Snapshot(db DB) []Event {
	d := s.db(db)
	var out []Event
	for table, rows := range d.rows {
		for _, r := range sortedRows(rows) {
			out = append(out, Event{DB: db, Table: table, New: r})
		}
	}
	return out
}
