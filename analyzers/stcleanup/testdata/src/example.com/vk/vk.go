// Package vk is a graphics binding with explicit-release handles of three
// kinds and no directives of its own: package gfx describes it with
// //state:extern lines.
package vk

import "errors"

type Device struct{}

// Vulkan-style handles, destroyed by functions that take the device.
type Image struct{ h uintptr }
type Memory struct{ h uintptr }

func CreateImage(dev *Device) (*Image, *Memory, error) { return &Image{}, &Memory{}, nil }
func DestroyImage(dev *Device, img *Image)              {}
func FreeMemory(dev *Device, mem *Memory)               {}

// OpenGL-style objects: a name that is not a pointer.
type Texture uint32

func GenTexture() Texture         { return 1 }
func DeleteTexture(t Texture)     {}
func (t Texture) Valid() bool     { return t != 0 }
func (t Texture) Bind()           {}
func BindTexture(t Texture) error { return nil }

// Interface-method resources.
type Buffer struct{}

func NewBuffer(dev *Device) (*Buffer, error) { return &Buffer{}, nil }
func (b *Buffer) Destroy()                   {}
func (b *Buffer) Write(p []byte) error       { return nil }

// Submit takes the buffer only when it succeeds.
func Submit(dev *Device, b *Buffer) error { return nil }

type Shader struct{}

func NewShader(dev *Device) (*Shader, error) { return &Shader{}, nil }
func (s *Shader) Destroy()                   {}

// Desc is an options struct: CreatePipeline only reads it.
type Desc struct {
	Shader *Shader
	Name   string
}

type Pipeline struct{}

func CreatePipeline(dev *Device, d Desc) (*Pipeline, error)  { return &Pipeline{}, nil }
func CreatePipelineP(dev *Device, d *Desc) (*Pipeline, error) { return &Pipeline{}, nil }
func (p *Pipeline) Destroy()                                  {}

// Command buffers belong to their pool.
type CmdPool struct{}
type Cmd struct{}

func NewCmdPool(dev *Device) (*CmdPool, error) { return &CmdPool{}, nil }
func (p *CmdPool) Destroy()                    {}
func (p *CmdPool) Alloc() *Cmd                 { return &Cmd{} }
func (c *Cmd) Record()                         {}

var ErrLost = errors.New("device lost")
