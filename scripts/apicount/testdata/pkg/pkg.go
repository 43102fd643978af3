package pkg

const (
	A = 1
	B = 2
	c = 3
)

var V, w int

type T struct{ Field int }

type u struct{}

func F() {}

func f() {}

func (T) M()  {}
func (T) m()  {}
func (u) M()  {}
func (*T) n() {}
