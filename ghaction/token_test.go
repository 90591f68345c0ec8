package ghaction

import (
	"errors"
	"testing"
)

func TestBackendIDsFromToken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		token   string
		want    BackendIDs
		wantErr error
	}{
		{"uuids", fakeJWT(t, "Actions.ExampleScope Actions.Results:ce7f54c7-61c7-4aae-887f-30da475f5f1a:ca395085-040a-526b-2ce8-bdc85f692774"),
			BackendIDs{"ce7f54c7-61c7-4aae-887f-30da475f5f1a", "ca395085-040a-526b-2ce8-bdc85f692774"}, nil},
		{"act integers", fakeJWT(t, "Actions.Results:42:7"), BackendIDs{"42", "7"}, nil},
		{"no results scope", fakeJWT(t, "Actions.GenericRead:1 Actions.Results:1"), BackendIDs{}, ErrNoBackendIDs},
		{"not a jwt", "abc", BackendIDs{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := BackendIDsFromToken(tt.token)
			if tt.name == "not a jwt" {
				if err == nil {
					t.Fatal("want an error for a non-JWT token")
				}
				return
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
