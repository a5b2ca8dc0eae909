package client

import (
	"os"
	"testing"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/nb"
)

// TestTypedModels uses the generated NB models with the cache and
// transactions against the real ovsdb-server.
func TestTypedModels(t *testing.T) {
	schema, err := os.ReadFile("../../schema/nb/ovn-nb.ovsschema")
	if err != nil {
		t.Fatal(err)
	}

	eachServer(t, string(schema), testTypedModels)
}

func testTypedModels(t *testing.T, srv testServer) {
	ctx := t.Context()
	c := connectDB(t, srv.Socket(), nb.DatabaseName, Options{
		Tables: map[string][]string{nb.LogicalSwitchTable: nil, nb.LogicalSwitchPortTable: nil},
	})
	txn := c.Txn()
	lsp := txn.InsertModel(&nb.LogicalSwitchPort{Name: "lsp1", Addresses: []string{"00:00:00:00:00:01 10.0.0.1"}})
	ls := txn.InsertModel(&nb.LogicalSwitch{Name: "ls1", Ports: []ovsdb.UUID{lsp}, ExternalIDs: map[string]string{"owner": "test"}})
	res, err := txn.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := Get[nb.LogicalSwitch](c.Cache(), res.UUID(ls))
	if !ok {
		t.Fatal("switch not in cache")
	}
	if got.Name != "ls1" || len(got.Ports) != 1 || got.Ports[0] != res.UUID(lsp) || got.ExternalIDs["owner"] != "test" {
		t.Errorf("typed switch: %+v", got)
	}
	inserted := List[nb.LogicalSwitch](c.Cache())
	if len(inserted) != 1 || inserted[0].UUID != res.UUID(ls) {
		t.Errorf("List: %+v", inserted)
	}
	port := Load[nb.LogicalSwitchPort](c.Cache(), c.Cache().Row(nb.LogicalSwitchPortTable, res.UUID(lsp)))
	if port.Name != "lsp1" || len(port.Addresses) != 1 || port.Up != nil {
		t.Errorf("Load: %+v", port)
	}
	if _, ok := Get[nb.LogicalSwitch](c.Cache(), ovsdb.NewUUID()); ok {
		t.Error("Get found a row that does not exist")
	}

	// Update two columns through the model; the cache follows.
	got.Name = "renamed"
	got.ExternalIDs = map[string]string{"owner": "other"}
	txn = c.Txn()
	txn.UpdateModel(&got, got.UUID, "name", "external_ids")
	if _, err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	again, _ := Get[nb.LogicalSwitch](c.Cache(), got.UUID)
	if again.Name != "renamed" || again.ExternalIDs["owner"] != "other" || len(again.Ports) != 1 {
		t.Errorf("after UpdateModel: %+v", again)
	}
	txn = c.Txn()
	txn.UpdateModel(&got, got.UUID, "no_such_column")
	if _, err := txn.Commit(ctx); err == nil {
		t.Error("UpdateModel of an unknown column was accepted")
	}
}
