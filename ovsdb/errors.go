package ovsdb

import "fmt"

// Error tags of RFC 7047 and ovsdb-server, as they appear in the "error"
// member of an error object.
const (
	ErrConstraintViolation  = "constraint violation"
	ErrReferentialIntegrity = "referential integrity violation"
	ErrResourcesExhausted   = "resources exhausted"
	ErrIOError              = "I/O error"
	ErrDuplicateUUIDName    = "duplicate uuid-name"
	ErrDomainError          = "domain error"
	ErrRangeError           = "range error"
	ErrTimedOut             = "timed out"
	ErrNotSupported         = "not supported"
	ErrAborted              = "aborted"
	ErrNotOwner             = "not owner"
	ErrSyntax               = "syntax error"
	ErrUnknownColumn        = "unknown column"
	ErrUnknownDatabase      = "unknown database"
	ErrNotAllowed           = "not allowed"
	ErrPermission           = "permission error"
	ErrCanceled             = "canceled"
	// ErrOVSDB is ovsdb-server's tag for duplicate set elements and map
	// keys.
	ErrOVSDB = "ovsdb error"
)

// Error is an OVSDB error object: {"error": Tag, "details": Details,
// "syntax": Syntax}. Syntax, when not empty, is the JSON text that was
// wrong, as ovsdb-server gives it (its members sorted by name).
type Error struct {
	Tag     string
	Details string
	Syntax  string
}

// Errorf returns an *Error with the given tag and formatted details.
func Errorf(tag, format string, args ...any) *Error {
	return &Error{Tag: tag, Details: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string {
	if e.Details == "" {
		return e.Tag
	}
	return e.Tag + ": " + e.Details
}

// AppendJSON appends e as a JSON error object.
func (e *Error) AppendJSON(b []byte) []byte {
	b = append(b, `{"error":`...)
	b = AppendJSONString(b, e.Tag)
	if e.Details != "" {
		b = append(b, `,"details":`...)
		b = AppendJSONString(b, e.Details)
	}
	if e.Syntax != "" {
		b = append(b, `,"syntax":`...)
		b = AppendJSONString(b, e.Syntax)
	}
	return append(b, '}')
}

// MarshalJSON implements json.Marshaler.
func (e *Error) MarshalJSON() ([]byte, error) { return e.AppendJSON(nil), nil }

// withSyntax returns err with v, the JSON that was wrong, as its "syntax"
// member, unless it already has one.
func withSyntax(err error, v any) error {
	e, ok := err.(*Error)
	if !ok || e.Syntax != "" {
		return err
	}
	return &Error{Tag: e.Tag, Details: e.Details, Syntax: syntaxText(v)}
}

// ErrorAt returns an *Error with the given tag and formatted details
// whose "syntax" member is v, the JSON that was wrong (in the generic
// form of DecodeJSON).
func ErrorAt(v any, tag, format string, args ...any) *Error {
	return &Error{Tag: tag, Details: fmt.Sprintf(format, args...), Syntax: syntaxText(v)}
}
