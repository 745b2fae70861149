package apiservertest

import "testing"

func TestStart(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.StopAPI()
	if err := s.StartAPI(); err != nil {
		t.Fatal(err)
	}
}
