package metrics

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/govn/govn/ovsdb/server"
)

// DB is a collector of a govn db server's sessions, monitors, rows,
// transactions and monitor fan-out, per database, under govn_db_*.
func DB(stats func() server.Stats) prometheus.Collector {
	var ds descs
	sessions := ds.add("govn_db_sessions", "Client connections.")
	monitors := ds.add("govn_db_monitors", "Monitors of the database.", "db")
	rows := ds.add("govn_db_rows", "Rows in the database.", "db")
	txns := ds.add("govn_db_transactions_total", "Transact requests answered.", "db")
	commits := ds.add("govn_db_commits_total", "Transactions that changed the database.", "db")
	updates := ds.add("govn_db_monitor_updates_total", "Update notifications queued for monitors (commits' fan-out).", "db")
	return &collector{descs: ds, collect: func(ch chan<- prometheus.Metric) {
		st := stats()
		gauge(ch, sessions, float64(st.Sessions))
		names := make([]string, 0, len(st.Databases))
		for n := range st.Databases {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			d := st.Databases[n]
			gauge(ch, monitors, float64(d.Monitors), n)
			gauge(ch, rows, float64(d.Rows), n)
			counter(ch, txns, d.Transactions, n)
			counter(ch, commits, d.Commits, n)
			counter(ch, updates, d.MonitorUpdates, n)
		}
	}}
}
