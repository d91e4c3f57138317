package openaitest

import (
	"context"
	"errors"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// ErrNoCompleted is Respond's error for a stream that ended without
// response.completed.
var ErrNoCompleted = errors.New("the stream ended without response.completed")

// Respond sends a Responses request with the official client, whole or
// streamed, as an agent does; a stream's answer is its
// response.completed's response.
func Respond(client openai.Client, params responses.ResponseNewParams, stream bool, opts ...option.RequestOption) (*responses.Response, error) {
	if !stream {
		return client.Responses.New(context.Background(), params, opts...)
	}
	s := client.Responses.NewStreaming(context.Background(), params, opts...)
	var done *responses.Response
	for s.Next() {
		if ev := s.Current(); ev.Type == "response.completed" {
			r := ev.AsResponseCompleted().Response
			done = &r
		}
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	if done == nil {
		return nil, ErrNoCompleted
	}
	return done, nil
}
