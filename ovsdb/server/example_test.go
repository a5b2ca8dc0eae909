package server_test

import (
	"context"
	"log"
	"time"

	"github.com/govn/govn/ovsdb/server"
)

// Serving a database file on a unix socket, as "govn db" does.
func Example() {
	ctx := context.Background()
	db, dblog, err := server.OpenFile("/var/lib/govn/nb.db", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer dblog.Close()
	srv := server.New(server.Options{})
	if err := srv.AddDatabase(db, dblog); err != nil {
		log.Fatal(err)
	}
	l, err := server.Listen(ctx, "punix:/run/govn/nb.sock")
	if err != nil {
		log.Fatal(err)
	}
	go srv.RunCompaction(ctx, 10*time.Second)
	log.Fatal(srv.Serve(ctx, l))
}
